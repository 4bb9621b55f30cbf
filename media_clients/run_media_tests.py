#!/usr/bin/env python3
"""Media tests client: liveness prerequisite, then parameter and error-code cases per kind.

Writes ``tests/tests_record.json`` (``tt-tests-record/1``, the same record as the API
conformance suite) and ``tests/junit.xml``. When the prerequisite fails the other cases are
reported as skipped with that reason. ``markers=`` / ``test_name=`` select cases.
"""
from __future__ import annotations

import base64
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from media_clients import data
from media_clients.common import EXIT_FAILED, EXIT_OK, ClientRun, log, main_wrapper, now_iso
from media_clients.invariance import INVARIANCE_CASES, Divergence, Diverged
from media_clients.transport import Answer, MediaHttp
from media_clients.vision import VISION_CASES
from media_clients.workloads import (CnnWorkload, EmbeddingWorkload, ImageWorkload, SpeechWorkload,
                                     describe, spec_params)
from contracts.retry import GaveUp, NotYet, retry
from contracts.workflow_keys import MEDIA_TEST_ARGS
from records.server_tests import CaseResult, TestsRecord

WORKFLOW_ARG_KEYS = frozenset(MEDIA_TEST_ARGS)
LIVENESS_DEADLINE_S = 120.0


class CaseFailed(AssertionError):
    pass


class CaseSkipped(Exception):
    pass


def expect(answer: Answer, status: int, what: str) -> Answer:
    if answer.status != status:
        raise CaseFailed(f"{what}: expected HTTP {status}, got {describe(answer)}")
    return answer


def expect_error_body(answer: Answer) -> None:
    """Error answers carry {"error": {"message", ...}} so a client can show why."""
    try:
        body = answer.json()
    except ValueError:
        raise CaseFailed(f"HTTP {answer.status} body is not JSON: {answer.text(120)}") from None
    if not isinstance(body, dict) or not isinstance(body.get("error"), dict) or not body["error"].get("message"):
        raise CaseFailed(f"HTTP {answer.status} body has no error.message: {answer.text(200)}")


@dataclass(frozen=True)
class Case:
    name: str
    markers: tuple[str, ...]
    body: Callable[[ClientRun], Divergence | None]  # an invariance case returns its counts


# ----------------------------------------------------------------------------- shared cases


def liveness(run: ClientRun) -> None:
    def alive_and_ready(remaining_s: float) -> None:
        answer = run.http.get("/tt-liveness", timeout_s=min(10.0, max(remaining_s, 1.0)))
        if not answer.ok:
            raise NotYet(describe(answer))
        body = answer.json()
        if not (body.get("status") == "alive" and body.get("model_ready", True)):
            raise NotYet(f"status {body.get('status')!r}, model_ready {body.get('model_ready')!r}")

    try:
        retry("/tt-liveness to say alive and ready", alive_and_ready, deadline_s=LIVENESS_DEADLINE_S, delay_s=2)
    except GaveUp as exc:
        raise CaseFailed(f"/tt-liveness not alive and ready after {LIVENESS_DEADLINE_S:g} s: {exc.reason}") from None


def models_lists_served(run: ClientRun) -> None:
    body = expect(run.http.get("/v1/models"), 200, "/v1/models").json()
    ids = [m.get("id") for m in body.get("data", [])]
    if run.served_model_name not in ids:
        raise CaseFailed(f"/v1/models lists {ids}, not {run.served_model_name!r}")


def auth_required(run: ClientRun) -> None:
    if not run.http.api_key:
        raise CaseSkipped("the server runs without auth (--no-auth)")
    answer = run.http.get("/v1/models", auth=False)
    expect(answer, 401, "request without a bearer")
    wrong = MediaHttp(run.http.base_url, "wrong-key").get("/v1/models")
    expect(wrong, 401, "request with a wrong bearer")


def _unknown_model(path_body: Callable[[ClientRun], Answer]) -> Callable[[ClientRun], None]:
    def case(run: ClientRun) -> None:
        answer = path_body(run)
        expect(answer, 404, "unknown model")
        expect_error_body(answer)
    return case


# ----------------------------------------------------------------------------- image


def image_ok(run: ClientRun) -> None:
    w = ImageWorkload(spec_params(run.spec))
    sent = w.send(run.http, run.served_model_name, 0)
    if not sent.ok:
        raise CaseFailed(sent.error or "image generation failed")


def image_bad_steps(run: ClientRun) -> None:
    w = ImageWorkload(spec_params(run.spec))
    for steps in (0, 100000):
        body = {**w.body(run.served_model_name, 0), "num_inference_steps": steps}
        answer = run.http.post_json(w.endpoint, body)
        expect(answer, 400, f"num_inference_steps={steps}")
        expect_error_body(answer)


def image_missing_prompt(run: ClientRun) -> None:
    answer = run.http.post_json("/v1/images/generations", {"model": run.served_model_name})
    expect(answer, 400, "no prompt")
    expect_error_body(answer)


def image_too_many(run: ClientRun) -> None:
    w = ImageWorkload(spec_params(run.spec))
    answer = run.http.post_json(w.endpoint, {**w.body(run.served_model_name, 0), "number_of_images": 1000})
    expect(answer, 400, "number_of_images=1000")


# ----------------------------------------------------------------------------- speech


def _clip() -> data.Clip:
    clips = data.speech_clips()
    return min(clips, key=lambda c: c.seconds)


def speech_ok(run: ClientRun) -> None:
    w = SpeechWorkload({})
    answer = expect(w.transcribe(run.http, run.served_model_name, _clip()), 200, "transcription")
    if not str(answer.json().get("text", "")).strip():
        raise CaseFailed("empty transcript of a spoken sentence")


def speech_text_format(run: ClientRun) -> None:
    clip = _clip()
    answer = run.http.post_form("/v1/audio/transcriptions", {"model": run.served_model_name, "response_format": "text"},
                                {"file": ("clip.wav", clip.wav, "audio/wav")})
    expect(answer, 200, "response_format=text")
    if answer.body.lstrip().startswith(b"{"):
        raise CaseFailed(f"response_format=text answered JSON: {answer.text(100)}")


def speech_not_audio(run: ClientRun) -> None:
    answer = run.http.post_form("/v1/audio/transcriptions", {"model": run.served_model_name},
                                {"file": ("noise.wav", b"this is not audio" * 10, "audio/wav")})
    expect(answer, 400, "a file that is not audio")
    expect_error_body(answer)


def speech_missing_file(run: ClientRun) -> None:
    answer = run.http.post_form("/v1/audio/transcriptions", {"model": run.served_model_name}, {})
    expect(answer, 400, "no file part")


def speech_bad_temperature(run: ClientRun) -> None:
    clip = _clip()
    answer = run.http.post_form("/v1/audio/transcriptions", {"model": run.served_model_name, "temperature": "7"},
                                {"file": ("clip.wav", clip.wav, "audio/wav")})
    expect(answer, 400, "temperature=7")


# ----------------------------------------------------------------------------- cnn


def cnn_ok(run: ClientRun) -> None:
    w = CnnWorkload({})
    answer = expect(w.classify(run.http, run.served_model_name, w.photos[0], top_k=3), 200, "classification")
    labels = answer.json().get("image_data", [])
    if len(labels) != 3:
        raise CaseFailed(f"top_k=3 answered {len(labels)} labels")


def cnn_multipart(run: ClientRun) -> None:
    photo = CnnWorkload({}).photos[1]
    answer = run.http.post_form("/v1/cnn/search-image", {"model": run.served_model_name, "top_k": "2"},
                                {"image": (f"{photo.name}.png", photo.png, "image/png")})
    expect(answer, 200, "multipart upload")
    if len(answer.json().get("image_data", [])) != 2:
        raise CaseFailed("multipart top_k=2 did not answer 2 labels")


def cnn_not_image(run: ClientRun) -> None:
    answer = run.http.post_json("/v1/cnn/search-image", {"model": run.served_model_name,
                                                         "image": base64.b64encode(b"not an image").decode()})
    expect(answer, 400, "bytes that are not an image")
    expect_error_body(answer)


def cnn_bad_base64(run: ClientRun) -> None:
    answer = run.http.post_json("/v1/cnn/search-image", {"model": run.served_model_name, "image": "%%%not base64%%%"})
    expect(answer, 400, "invalid base64")


def cnn_bad_top_k(run: ClientRun) -> None:
    photo = CnnWorkload({}).photos[0]
    answer = run.http.post_json("/v1/cnn/search-image", {"model": run.served_model_name, "top_k": 0,
                                                         "image": base64.b64encode(photo.png).decode()})
    expect(answer, 400, "top_k=0")


# ----------------------------------------------------------------------------- embedding


def embedding_ok(run: ClientRun) -> None:
    body = expect(EmbeddingWorkload({}).embed(run.http, run.served_model_name, ["one", "two", "three"]), 200,
                  "three inputs").json()
    vectors = [d.get("embedding") for d in body.get("data", [])]
    if len(vectors) != 3 or len({len(v) for v in vectors}) != 1:
        raise CaseFailed(f"expected 3 vectors of one length, got {[len(v) for v in vectors]}")


def embedding_single_string(run: ClientRun) -> None:
    body = expect(run.http.post_json("/v1/embeddings", {"model": run.served_model_name, "input": "hello"}), 200,
                  "a string input").json()
    if len(body.get("data", [])) != 1:
        raise CaseFailed("a string input did not give one vector")


def embedding_base64(run: ClientRun) -> None:
    body = expect(run.http.post_json("/v1/embeddings", {"model": run.served_model_name, "input": "hello",
                                                        "encoding_format": "base64"}), 200, "base64").json()
    vector = body["data"][0]["embedding"]
    if not isinstance(vector, str) or len(base64.b64decode(vector)) % 4:
        raise CaseFailed("encoding_format=base64 did not give base64 float32 bytes")


def embedding_empty(run: ClientRun) -> None:
    answer = run.http.post_json("/v1/embeddings", {"model": run.served_model_name, "input": []})
    expect(answer, 400, "an empty input list")
    expect_error_body(answer)


def embedding_bad_format(run: ClientRun) -> None:
    answer = run.http.post_json("/v1/embeddings", {"model": run.served_model_name, "input": "x",
                                                   "encoding_format": "hex"})
    expect(answer, 400, "encoding_format=hex")


SHARED = (Case("prerequisite/liveness", ("prerequisite", "smoke"), liveness),
          Case("models/lists_served_model", ("param", "smoke"), models_lists_served),
          Case("auth/bearer_required", ("error", "smoke"), auth_required))


def _vision_case(check: Callable[[MediaHttp, str], None]) -> Callable[[ClientRun], None]:
    return lambda run: check(run.http, run.served_model_name)


def _invariance(kind: str) -> tuple[Case, ...]:
    """The kind's batch-invariance cases (``media_clients.invariance``), judged against the spec's
    ``max_batch_divergence``."""
    def body(check) -> Callable[[ClientRun], Divergence]:
        return lambda run: check(run.http, run.served_model_name, run.spec.device_model_spec.max_batch_divergence)
    return tuple(Case(name, markers, body(check)) for name, markers, check in INVARIANCE_CASES.get(kind, ()))


KIND_CASES: dict[str, tuple[Case, ...]] = {
    "vision": tuple(Case(name, markers, _vision_case(check)) for name, markers, check in VISION_CASES),
    "image": (Case("image/generate_ok", ("param", "smoke"), image_ok),
              Case("image/steps_out_of_range_400", ("param", "error"), image_bad_steps),
              Case("image/missing_prompt_400", ("error",), image_missing_prompt),
              Case("image/too_many_images_400", ("param", "error"), image_too_many),
              Case("image/unknown_model_404", ("error",), _unknown_model(lambda r: r.http.post_json(
                  "/v1/images/generations", {"model": "no-such-model", "prompt": "x"})))),
    "speech": (Case("speech/transcribe_ok", ("param", "smoke"), speech_ok),
               Case("speech/response_format_text", ("param",), speech_text_format),
               Case("speech/not_audio_400", ("error",), speech_not_audio),
               Case("speech/missing_file_400", ("error",), speech_missing_file),
               Case("speech/temperature_out_of_range_400", ("param", "error"), speech_bad_temperature),
               Case("speech/unknown_model_404", ("error",), _unknown_model(lambda r: r.http.post_form(
                   "/v1/audio/transcriptions", {"model": "no-such-model"},
                   {"file": ("clip.wav", _clip().wav, "audio/wav")}))), *_invariance("speech")),
    "cnn": (Case("cnn/classify_top_k", ("param", "smoke"), cnn_ok),
            Case("cnn/multipart_upload", ("param",), cnn_multipart),
            Case("cnn/not_an_image_400", ("error",), cnn_not_image),
            Case("cnn/invalid_base64_400", ("error",), cnn_bad_base64),
            Case("cnn/top_k_zero_400", ("param", "error"), cnn_bad_top_k),
            Case("cnn/unknown_model_404", ("error",), _unknown_model(lambda r: r.http.post_json(
                "/v1/cnn/search-image", {"model": "no-such-model", "image": base64.b64encode(
                    CnnWorkload({}).photos[0].png).decode()}))), *_invariance("cnn")),
    "embedding": (Case("embedding/batch_ok", ("param", "smoke"), embedding_ok),
                  Case("embedding/single_string", ("param",), embedding_single_string),
                  Case("embedding/base64_encoding", ("param",), embedding_base64),
                  Case("embedding/empty_input_400", ("error",), embedding_empty),
                  Case("embedding/bad_encoding_format_400", ("param", "error"), embedding_bad_format),
                  Case("embedding/unknown_model_404", ("error",), _unknown_model(lambda r: r.http.post_json(
                      "/v1/embeddings", {"model": "no-such-model", "input": "x"}))), *_invariance("embedding")),
}


def select(cases: tuple[Case, ...], markers: str | None, test_name: str | None) -> list[Case]:
    wanted = {m.strip() for m in (markers or "").split(",") if m.strip()}
    out = []
    for case in cases:
        if "prerequisite" in case.markers:
            out.append(case)  # always: the other cases mean nothing without it
        elif (not wanted or wanted & set(case.markers)) and (not test_name or test_name in case.name):
            out.append(case)
    return out


def run_case(run: ClientRun, case: Case, blocked: str | None) -> CaseResult:
    if blocked:
        return CaseResult(case.name, "skipped", 0.0, blocked, list(case.markers))
    started = time.monotonic()
    counts = None
    try:
        counts = case.body(run)
        outcome, message = "passed", None
    except AssertionError as exc:  # CaseFailed, and the kind modules' own check failures
        outcome, message = "failed", str(exc).splitlines()[0][:400]
        counts = exc.divergence if isinstance(exc, Diverged) else None
    except CaseSkipped as exc:
        outcome, message = "skipped", str(exc)
    except data.DataUnavailable as exc:
        outcome, message = "error", f"test data unavailable: {exc}"
    except Exception as exc:  # noqa: BLE001 - a broken case is an error, never a pass
        outcome, message = "error", f"{type(exc).__name__}: {exc}"[:400]
    measured = counts if isinstance(counts, Divergence) else None
    return CaseResult(case.name, outcome, round(time.monotonic() - started, 3), message, list(case.markers),
                      divergent=measured.divergent if measured else None,
                      compared=measured.compared if measured else None)


def write_junit(path: Path, record: TestsRecord) -> None:
    suite = ET.Element("testsuite", name=record.name, tests=str(len(record.cases)),
                       failures=str(record.counts.get("failed", 0)), errors=str(record.counts.get("error", 0)),
                       skipped=str(record.counts.get("skipped", 0)), time=f"{record.duration_s:.3f}")
    for case in record.cases:
        element = ET.SubElement(suite, "testcase", classname=f"media.{record.name}", name=case.name,
                                time=f"{case.duration_s:.3f}")
        if case.outcome in ("failed", "error", "skipped"):
            tag = {"failed": "failure", "error": "error", "skipped": "skipped"}[case.outcome]
            ET.SubElement(element, tag, message=case.message or "")
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def run(run: ClientRun) -> int:
    out = run.out_dir("tests")
    cases = select(SHARED + KIND_CASES[run.kind], run.workflow_args.get("markers"), run.workflow_args.get("test_name"))
    record = TestsRecord(name=f"media_api_{run.kind}", model_id=run.model_id, served_model_name=run.served_model_name,
                         server_url=run.http.base_url, engine=run.spec.engine.value,
                         started=now_iso(), filters={k: run.workflow_args[k] for k in ("markers", "test_name")
                                                     if run.workflow_args.get(k)},
                         pytest_command="media_clients/run_media_tests.py (built-in cases, no pytest)")
    started = time.monotonic()
    blocked = None
    for case in cases:
        if run.stop.is_set():
            blocked = blocked or "interrupted"
        result = run_case(run, case, blocked)
        record.cases.append(result)
        log(f"{result.outcome.upper():7s} {case.name}" + (f": {result.message}" if result.message else ""))
        if "prerequisite" in case.markers and result.outcome != "passed":
            blocked = f"prerequisite {case.name} did not pass"
    record.duration_s = round(time.monotonic() - started, 3)
    record.summarise()
    junit = out / "junit.xml"
    write_junit(junit, record)
    path = record.write(out / "tests_record.json")
    run.write_outputs("tests", [path, junit])
    log(f"media tests: {record.detail}")
    return EXIT_OK if record.passed else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    return main_wrapper(run, argv, __doc__.splitlines()[0], "tests")


if __name__ == "__main__":
    sys.exit(main())
