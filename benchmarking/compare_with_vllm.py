"""Reproducible comparison: our client vs `vllm bench serve`, same stub / same server, same run.

    PYTHONPATH=. <benchmarks venv>/bin/python -m benchmarking.compare_with_vllm \
        --vllm-python /tmp/exp/eng/bin/python --tokenizer /tmp/exp/smollm2 [--real-server] --out /tmp/cmp

1. Capacity: the stub in burst mode (pre-rendered responses, uvloop) pinned to the last CPU, each
   client pinned to CPU 0, concurrency 64; 32-token responses for req/s, 256-token for chunks/s.
   Client CPU: ours from process_time around the run; vLLM's from wait4() rusage of two runs of
   different sizes (the difference cancels its start-up, import and dataset generation).
2. Timing: the stub programmed with TTFT/gap, concurrency 64; |measured - programmed| and
   |measured - actual stub timeline| p99 for both clients (vLLM via --save-detailed, matched to the
   stub's write log by x-request-id).
3. Real server (--real-server): a vLLM CPU server on SmolLM2; one point through run_benchmarks with
   tools=tt,vllm, repeated; mean TTFT, mean TPOT and output throughput side by side with ratios.
Prints a table and writes compare.json to --out. Machine load is printed: on a shared machine the
timing figures measure the machine as much as the clients.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import urllib.request

from benchmarking import vllm_tool
from benchmarking.certify import stat
from contracts import REPO_ROOT
from contracts.retry import GaveUp, wait_http_ok


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", **vllm_tool.client_env())


class Stub:
    def __init__(self, cpu: int, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarking.stub_server", "--port", "0",
                                      "--cpu", str(cpu), *args],
                                     stdout=subprocess.PIPE, text=True, env=_env(), cwd=REPO_ROOT)
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline().split()[1])}"

    def get(self, path: str, post: bool = False) -> dict:
        req = urllib.request.Request(self.url + path, data=b"" if post else None)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _run_rusage(cmd: list[str], cpu: int, log_path: str) -> tuple[int, float]:
    """Run pinned to `cpu`; returns (exit code, child CPU seconds user+sys)."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=REPO_ROOT,
                                preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, ru.ru_utime + ru.ru_stime


def vllm_bench(a, url: str, osl: int, n: int, out: str, name: str, *, detailed=False,
               prefix=None) -> tuple[dict, float]:
    cmd = vllm_tool.bench_command(a.vllm_python, url, "stub-model", a.tokenizer, 16, osl, 64, n, out, name,
                                  detailed=detailed)
    if prefix:
        cmd += ["--request-id-prefix", prefix]
    rc, cpu = _run_rusage(cmd, 0, os.path.join(out, name + ".log"))
    if rc != 0:
        raise RuntimeError(f"vllm bench serve failed (exit {rc}); see {os.path.join(out, name + '.log')}")
    with open(os.path.join(out, name)) as fh:
        return json.load(fh), cpu


def capacity(a, out: str) -> dict:
    res = {}
    stub = Stub(a.stub_cpu, "--loop", "uvloop")
    try:
        for osl, n_small, n_big in ((32, 1000, a.cap_requests), (256, 200, max(400, a.cap_requests // 6))):
            p = subprocess.run([sys.executable, "-m", "benchmarking.capacity", "--url", stub.url, "--osl", str(osl),
                                "--num-requests", str(n_big), "--cpu", "0"], capture_output=True, text=True,
                               env=_env(), cwd=REPO_ROOT, check=True)
            ours = json.loads(p.stdout.strip().splitlines()[-1])
            s0 = stub.get("/stub/stats")["cpu_s"]
            small, cpu_small = vllm_bench(a, stub.url, osl, n_small, out, f"cap{osl}_small.json")
            big, cpu_big = vllm_bench(a, stub.url, osl, n_big, out, f"cap{osl}_big.json")
            stub_cpu_vllm = stub.get("/stub/stats")["cpu_s"] - s0
            d_req = big["completed"] - small["completed"]
            d_chunks = big["total_output_tokens"] - small["total_output_tokens"]
            theirs = {"req_per_s": big["request_throughput"], "chunks_per_s": big["output_throughput"],
                      "cpu_s_per_1k_requests": (cpu_big - cpu_small) / d_req * 1000 if d_req > 0 else None,
                      "cpu_s_per_1m_chunks": (cpu_big - cpu_small) / d_chunks * 1e6 if d_chunks > 0 else None,
                      "stub_cpu_s_both_runs": stub_cpu_vllm, "requests": big["completed"]}
            res[f"osl{osl}"] = {"tt": ours, "vllm": theirs}
    finally:
        stub.stop()
    return res


def timing(a, out: str) -> dict:
    stub = Stub(a.stub_cpu, "--ttft-ms", str(a.ttft_ms), "--itl-ms", str(a.itl_ms))
    try:
        p = subprocess.run([sys.executable, "-m", "benchmarking.certify", "--url", stub.url,
                            "--ttft-ms", str(a.ttft_ms), "--itl-ms", str(a.itl_ms), "--osl", "32",
                            "--num-requests", "256", "--concurrency", "64", "--cpu", "0"],
                           capture_output=True, text=True, env=_env(), cwd=REPO_ROOT, check=True)
        ours = json.loads(p.stdout.strip().splitlines()[-1])
        stub.get("/stub/stats", post=True)
        raw, _ = vllm_bench(a, stub.url, 32, 256, out, "timing_vllm.json", detailed=True, prefix="vb-")
        writes = stub.get("/stub/writes")
        theirs = _vllm_timing(raw, writes, a.ttft_ms, a.itl_ms)
        theirs["stub_lateness_us"] = stub.get("/stub/stats")["lateness_us"]
    finally:
        stub.stop()
    return {"tt": ours, "vllm": theirs}


def _vllm_timing(raw: dict, writes: dict, ttft_ms: float, itl_ms: float) -> dict:
    """vLLM's per-request ttfts/itls against the programmed values and the stub's write log."""
    by_index = {}
    for rid, w in writes.items():
        tail = rid.rsplit("-", 1)[-1]
        if tail.isdigit():
            by_index[int(tail)] = w
    pt, pi, at, ai = [], [], [], []
    for i, (ttft, itls) in enumerate(zip(raw.get("ttfts", []), raw.get("itls", []))):
        if not ttft:
            continue
        pt.append(abs(ttft * 1000 - ttft_ms))
        pi += [abs(g * 1000 - itl_ms) for g in itls]
        w = by_index.get(i)
        if w and len(w) - 1 == len(itls) + 1:
            wt = w[1:]
            at.append(abs(ttft - (wt[0] - w[0])) * 1000)
            ai += [abs(g - (wt[k + 1] - wt[k])) * 1000 for k, g in enumerate(itls)]
    return {"ttft_vs_programmed": stat(pt), "itl_vs_programmed": stat(pi), "ttft_vs_actual": stat(at),
            "itl_vs_actual": stat(ai)}


def real_server(a, out: str) -> dict:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(os.path.join(out, "vllm_server.log"), "w")
    srv = subprocess.Popen([a.vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", a.model_dir,
                            "--served-model-name", "SmolLM2-135M-Instruct", "--host", "127.0.0.1", "--port", str(port),
                            "--dtype", "float32", "--enforce-eager", "--max-model-len", "2048"],
                           stdout=log, stderr=subprocess.STDOUT, env=dict(_env(), VLLM_CPU_KVCACHE_SPACE="1"))
    try:

        def not_exited() -> None:
            if srv.poll() is not None:
                raise RuntimeError(f"vLLM server exited ({srv.returncode}); see vllm_server.log")

        try:
            wait_http_ok(f"vLLM to answer {url}/health", url + "/health", deadline_s=300, alive_check=not_exited,
                         delay_s=1)
        except GaveUp as exc:
            raise RuntimeError(f"vLLM server did not start ({exc}); see vllm_server.log") from None
        spec = {"model_id": "smollm2-cpu", "hf_model_repo": "HuggingFaceTB/SmolLM2-135M-Instruct",
                "device_model_spec": {"max_context": 2048, "max_concurrency": 4, "perf_reference": []}}
        spec_path = os.path.join(out, "spec.json")
        with open(spec_path, "w") as fh:
            json.dump(spec, fh)
        reps = []
        for rep in range(a.repeats):
            run_dir = os.path.join(out, f"real_rep{rep}")
            env = dict(_env(), TT_SERVED_MODEL_NAME="SmolLM2-135M-Instruct", TT_TOKENIZER_DIR=a.model_dir)
            subprocess.run([sys.executable, "benchmarking/run_benchmarks.py", "--run-dir", run_dir, "--model-spec-json",
                            spec_path, "--server-url", url, "--workflow-args-json",
                            json.dumps({"points": a.real_point, "tools": "tt,vllm", "vllm_python": a.vllm_python}),
                            *(["--disable-trace-capture"] if rep else [])], env=env, cwd=REPO_ROOT, check=False)
            stem = "point_isl-{}_osl-{}_con-{}_n-{}".format(*a.real_point.split("x"))
            got = {}
            for tool, suffix in (("tt", ".json"), ("vllm", ".vllm-bench.json")):
                path = os.path.join(run_dir, "benchmarks", stem + suffix)
                if os.path.exists(path):
                    with open(path) as fh:
                        got[tool] = json.load(fh)["metrics"]
            reps.append(got)
        keys = ("mean_ttft_ms", "mean_tpot_ms", "output_throughput")
        summary = {}
        for tool in ("tt", "vllm"):
            vals = [r[tool] for r in reps if tool in r]
            summary[tool] = {k: sum(v[k] for v in vals) / len(vals) for k in keys} if vals else None
        return {"point": a.real_point, "repeats": reps, "mean": summary}
    finally:
        srv.terminate()
        try:
            srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
        log.close()


def _ratio(a, b):
    return None if a in (None, 0) or b in (None, 0) else a / b


def report(res: dict) -> None:
    print(f"\nload average at start: {res['loadavg_start']}, at end: {res['loadavg_end']}")
    if "capacity" in res:
        print("\nCAPACITY (client on one core, concurrency 64, stub in burst mode)")
        print(f"{'':28}{'tt-bench':>14}{'vllm bench':>14}{'tt/vllm':>10}")
        for osl, key, label in ((32, "req_per_s", "req/s (32-token)"), (256, "chunks_per_s", "chunks/s (256-token)"),
                                (32, "cpu_s_per_1k_requests", "CPU s / 1k req (32-tok)"),
                                (256, "cpu_s_per_1m_chunks", "CPU s / 1M chunks")):
            c = res["capacity"][f"osl{osl}"]
            t, v = c["tt"].get(key), c["vllm"].get(key)
            print(f"{label:28}{t or 0:14.3f}{v or 0:14.3f}{_ratio(t, v) or 0:10.2f}")
    if "timing" in res:
        print("\nTIMING ERROR p99 ms (concurrency 64; vs programmed / vs actual stub writes)")
        for m in ("ttft", "itl"):
            t, v = res["timing"]["tt"], res["timing"]["vllm"]
            print(f"{m:6} tt-bench {t[m + '_vs_programmed']['p99']:8.3f} / {t[m + '_vs_actual']['p99']:8.3f}    "
                  f"vllm {v[m + '_vs_programmed']['p99']:8.3f} / {v[m + '_vs_actual']['p99']:8.3f}")
        print(f"stub lateness p99 us: tt run {res['timing']['tt']['stub_lateness_us']['p99']:.0f}, "
              f"vllm run {res['timing']['vllm']['stub_lateness_us']['p99']:.0f}")
    if "real" in res and res["real"]["mean"]["tt"] and res["real"]["mean"]["vllm"]:
        print(f"\nREAL SERVER point {res['real']['point']} (mean of {len(res['real']['repeats'])} repeats)")
        for k in ("mean_ttft_ms", "mean_tpot_ms", "output_throughput"):
            t, v = res["real"]["mean"]["tt"][k], res["real"]["mean"]["vllm"][k]
            print(f"{k:20} tt {t:10.2f}  vllm {v:10.2f}  ratio {_ratio(t, v):.4f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vllm-python", required=True)
    ap.add_argument("--tokenizer", required=True, help="tokenizer dir for vllm bench's random dataset")
    ap.add_argument("--model-dir", default=None, help="model dir for --real-server (default: --tokenizer)")
    ap.add_argument("--out", default="/tmp/tt_bench_compare")
    ap.add_argument("--parts", default="capacity,timing", help="comma list of capacity,timing,real")
    ap.add_argument("--real-server", action="store_true", help="same as adding 'real' to --parts")
    ap.add_argument("--real-point", default="128x32x4x16")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cap-requests", type=int, default=4000)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    a = ap.parse_args(argv)
    a.model_dir = a.model_dir or a.tokenizer
    a.stub_cpu = max(os.sched_getaffinity(0))
    os.makedirs(a.out, exist_ok=True)
    parts = set(a.parts.split(",")) | ({"real"} if a.real_server else set())
    res: dict = {"loadavg_start": os.getloadavg()}
    if "capacity" in parts:
        res["capacity"] = capacity(a, a.out)
    if "timing" in parts:
        res["timing"] = timing(a, a.out)
    if "real" in parts:
        res["real"] = real_server(a, a.out)
    res["loadavg_end"] = os.getloadavg()
    with open(os.path.join(a.out, "compare.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    report(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
