"""Open report.html in headless Chromium: it must render (non-blank screenshot) with its plots.

Skips where Chromium is absent; with REQUIRE_BROWSER=1 (set by CI, which installs Debian's
chromium) a missing browser is a failure instead, so the check cannot silently vanish.
"""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from reports import run_reports

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def _browser() -> str:
    if CHROMIUM.exists():
        return str(CHROMIUM)
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but {CHROMIUM} is missing (install Debian's chromium)")
    pytest.skip(f"{CHROMIUM} not installed")


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_browser(), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into pixel rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = bpp = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and colour in (2, 6) and interlace == 0
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


@pytest.mark.browser
def test_report_html_renders_in_headless_chromium(make_run, tmp_path):
    _browser()
    run = make_run()
    run.set_status("TOP_PERF")  # a FAIL report shows the blockers table as well
    assert run_reports.main(["--run-dir", str(run.path)]) == 3
    html = (run.path / "reports/report.html").resolve()
    url = html.as_uri()

    dom = _run(["--dump-dom", url], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    for kind in ("throughput-latency", "ttft-distribution", "tpot-distribution", "accuracy"):
        assert f'data-plot="{kind}"' in dom.stdout, kind
    assert 'class="verdict FAIL"' in dom.stdout and "<table" in dom.stdout

    shot = tmp_path / "report.png"
    res = _run([f"--screenshot={shot}", "--window-size=1280,2400", url], tmp_path / "profile")
    assert shot.is_file(), res.stderr[-2000:]
    width, bpp, rows = png_pixels(shot.read_bytes())
    pixels = {row[i:i + 3] for row in rows[::8] for i in range(0, len(row), bpp * 8)}
    non_white = sum(1 for row in rows[::4] for i in range(0, len(row), bpp * 4)
                    if row[i:i + 3] != b"\xff\xff\xff")
    assert len(pixels) > 20, "screenshot is (nearly) one colour: the page did not render"
    assert non_white > 500
    # The verdict banner is FAIL-red somewhere near the top of the page.
    top = rows[:400]
    assert any(row[i:i + 3] == bytes((0xfd, 0xe7, 0xea)) for row in top
               for i in range(0, len(row), bpp)), "red verdict banner not found"
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_missing_browser_skips_or_fails_under_require_browser(monkeypatch, tmp_path):
    """The gate itself: absent Chromium is a skip locally and a failure when CI requires it."""
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception):
        _browser()
    monkeypatch.setenv("REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_BROWSER=1"):
        _browser()
