"""The slot loop with the real SmolLM2-135M-Instruct weights: greedy output equals model.generate.

Runs in the media-server venv (torch, transformers) as a child process, once per backend (``hf``:
the transformers forward; ``llama``: the loop's own forward on a static cache): four users of
different prompt lengths (three prefilled together, so in one forward where the backend batches
prefill; prompts longer than the 16-token chunk continue over several passes), one joining after
the others have decoded a few steps (so it is merged into a running batch), and a fifth user
cancelled mid-way (its row leaves; the others' rows must be unharmed), all greedy; each user's
text must equal ``model.generate`` (greedy, same prompt, no batching) decoded the same way. For
``llama`` the static cache must stay within slots x context and be freed when the batch empties.
"""
from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from tests.tt_media_server.conftest import SERVER_DIR, media_python

pytestmark = [pytest.mark.integration, pytest.mark.slow]
MODEL_DIR = os.path.expanduser("~/.cache/tt-inference-server/models/SmolLM2-135M-Instruct")

SCRIPT = textwrap.dedent("""
    import json, sys, torch
    from media_server.runners.text_backend_hf import HfSlotBackend
    from media_server.runners.text_backend_llama import LlamaSlotBackend
    from media_server.runners.text_engine import SlotEngine
    from media_server.runners.text_params import TextRequest

    backend = {"hf": HfSlotBackend, "llama": LlamaSlotBackend}[sys.argv[2]](sys.argv[1], threads=1)
    engine = SlotEngine(backend, max_slots=8, prefill_chunk=16)
    cache_rows = set()
    questions = ["What is 2+2?", "Name a color.", "Write a haiku about the sea, please.",
                 "Explain in one sentence why the sky looks blue during the day."]
    N = 12
    texts = {}
    def drain(steps=None):
        done = 0
        while engine.has_work() and (steps is None or done < steps):
            for event in engine.step():
                if event.type == "chunk":
                    texts[event.request_id] = texts.get(event.request_id, "") + event.data["text"]
            kv = getattr(backend, "kv", None)
            if kv is not None and kv.keys:
                cache_rows.add(kv.keys[0].shape[0])
                assert kv.capacity <= backend.max_model_len, kv.capacity
            done += 1
    for i, q in enumerate(questions[:3]):
        engine.submit(str(i), TextRequest(messages=[{"role": "user", "content": q}], max_tokens=N,
                                          temperature=0.0))
    engine.submit("c", TextRequest(prompt="Count from one to fifty:", max_tokens=N, temperature=0.0))
    drain(steps=3)
    engine.cancel("c")
    drain(steps=1)
    engine.submit("3", TextRequest(messages=[{"role": "user", "content": questions[3]}], max_tokens=N,
                                   temperature=0.0))
    drain()
    result = []
    for i, q in enumerate(questions):
        ids = backend.encode_chat([{"role": "user", "content": q}])
        out = backend.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                     max_new_tokens=N, do_sample=False)
        reference = backend.tokenizer.decode(out[0, len(ids):], skip_special_tokens=True)
        result.append({"slot_loop": texts.get(str(i), ""), "generate": reference})
    print("RESULT " + json.dumps(result))
    kv = getattr(backend, "kv", None)
    print("CACHE " + json.dumps({"rows_seen": sorted(cache_rows), "freed": kv is None or (kv.capacity == 0
                                 and kv.rows == 0)}))
    # min_tokens holds end-of-sequence back on the backend's (inference-mode) logits.
    engine.submit("m", TextRequest(messages=[{"role": "user", "content": "Say just the word yes."}],
                                   max_tokens=24, min_tokens=20, temperature=0.0))
    held = None
    while engine.has_work():
        for event in engine.step():
            if event.type == "done" and event.request_id == "m":
                held = event.data["completion_tokens"]
            assert event.type != "error", event
    print("MIN_TOKENS " + json.dumps(held))
""")


@pytest.mark.parametrize("backend", ["hf", "llama"])
def test_greedy_slot_loop_equals_model_generate(backend):
    python = media_python()
    if not os.path.isfile(os.path.join(MODEL_DIR, "config.json")):
        pytest.skip(f"SmolLM2 not converted yet at {MODEL_DIR} (run.py or scripts/run_tests.py converts it)")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([str(python), "-c", SCRIPT, MODEL_DIR, backend], cwd=SERVER_DIR, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    results = json.loads(line[len("RESULT "):])
    for result in results:
        assert result["slot_loop"], result
        assert result["slot_loop"] == result["generate"], result
    cache = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("CACHE "))[6:])
    if backend == "llama":  # one row per slot, never more; nothing held once every user has left
        assert cache == {"rows_seen": [8], "freed": True}, cache
    held = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("MIN_TOKENS "))[11:])
    assert held is not None and held >= 20, held
