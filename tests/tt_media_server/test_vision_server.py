"""Vision chat through a real media server serving the FAKE tiny-random-qwen3-vl (random weights,
real Qwen3-VL classes): image tokens counted, streaming with images, bad images and refused URLs.

Random weights: only shapes, token counts and plumbing are judged, never the words. One server for
the module with ALLOW_REMOTE_IMAGES=1 and private addresses refused (the default), so a loopback
URL is refused for its address, not because fetching is off. The fetch rules themselves (content
type, size cap, redirects) run against a local image server in the media-server venv.
"""
from __future__ import annotations

import base64
import io
import json
import subprocess

import pytest

from tests.tt_media_server.conftest import SERVER_DIR, media_python, module_server_fixtures

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL = "tiny-random-qwen3-vl"


def png(width: int, height: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, "PNG")
    return buffer.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def chat(parts, **fields) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": parts}], "max_tokens": 4, **fields}


server, client = module_server_fixtures("vision", {"MODEL": MODEL, "DEVICE": "cpu", "ALLOW_REMOTE_IMAGES": "1"})


def test_image_tokens_are_counted_in_prompt_tokens(client):
    text_only = client.post("/v1/chat/completions", json=chat([{"type": "text", "text": "what is this?"}]))
    one = client.post("/v1/chat/completions", json=chat([
        {"type": "image_url", "image_url": {"url": data_url(png(64, 64))}}, {"type": "text", "text": "what is this?"}]))
    two = client.post("/v1/chat/completions", json=chat([
        {"type": "image_url", "image_url": {"url": data_url(png(64, 64))}},
        {"type": "image_url", "image_url": {"url": data_url(png(128, 128))}},
        {"type": "text", "text": "what is this?"}]))
    assert text_only.status_code == one.status_code == two.status_code == 200, (one.text, two.text)
    base, usage_one, usage_two = (r.json()["usage"] for r in (text_only, one, two))
    # 64x64 px = 4x4 patches of 16 px, merged 2x2 -> 4 image tokens; 128x128 -> 16; plus the
    # <|vision_start|>/<|vision_end|> pair around each image.
    assert usage_one["prompt_tokens_details"] == {"image_tokens": 4, "images": 1}
    assert usage_one["prompt_tokens"] == base["prompt_tokens"] + 4 + 2
    assert usage_two["prompt_tokens_details"] == {"image_tokens": 20, "images": 2}
    assert usage_two["prompt_tokens"] == base["prompt_tokens"] + 20 + 4
    assert one.json()["choices"][0]["message"]["role"] == "assistant" and usage_one["completion_tokens"] >= 1


def test_streaming_with_an_image_ends_with_usage_and_done(client):
    body = chat([{"type": "image_url", "image_url": {"url": data_url(png(64, 64))}}], stream=True,
                stream_options={"include_usage": True})
    with client.stream("POST", "/v1/chat/completions", json=body, headers={"X-Request-ID": "vision-sse-1"}) as response:
        assert response.status_code == 200 and response.headers["x-request-id"] == "vision-sse-1"
        events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    usage = json.loads(events[-2])["usage"]
    assert usage["prompt_tokens_details"]["image_tokens"] == 4 and usage["completion_tokens"] >= 1


@pytest.mark.parametrize("url, status, words", [
    ("data:image/png;base64,@@@not-base64@@@", 400, "not valid base64"),
    (data_url(b"these bytes are no image"), 400, "not a decodable image"),
    (data_url(b"hello", "text/plain"), 400, "expected image/*"),
    ("ftp://example.com/cat.png", 400, "only http(s) and data:"),
    ("http://127.0.0.1:9/cat.png", 400, "loopback/private/link-local"),
    ("http://localhost:9/cat.png", 400, "loopback/private/link-local"),
    ("http://10.1.2.3/cat.png", 400, "loopback/private/link-local"),
    ("http://169.254.169.254/latest/meta-data", 400, "loopback/private/link-local"),
    ("http://[::1]:9/cat.png", 400, "loopback/private/link-local"),
])
def test_bad_images_and_refused_urls_are_400_naming_the_part(client, url, status, words):
    response = client.post("/v1/chat/completions", json=chat([
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]))
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("messages[0].content[1].image_url: ") and words in message, message


def test_too_many_images_and_malformed_parts_are_400(client):
    image = {"type": "image_url", "image_url": {"url": data_url(png(32, 32))}}
    assert client.post("/v1/chat/completions", json=chat([image] * 5)).status_code == 400
    bad_part = client.post("/v1/chat/completions", json=chat([{"type": "audio", "audio": "x"}]))
    assert bad_part.status_code == 400 and "messages" in bad_part.json()["error"]["message"]


FETCH_SCRIPT = r"""
import asyncio, http.server, io, json, sys, threading
from PIL import Image
from media_server.errors import MediaError
from media_server.vision.images import load_image
from media_server.vision.settings import VisionSettings

buffer = io.BytesIO(); Image.new("RGB", (40, 30), (1, 2, 3)).save(buffer, "PNG"); PNG = buffer.getvalue()

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_GET(self):
        routes = {"/cat.png": (200, "image/png", PNG), "/page": (200, "text/html", b"<html></html>"),
                  "/big.png": (200, "image/png", PNG + b"\0" * 4096), "/missing": (404, "text/plain", b"no")}
        if self.path.startswith("/hop"):
            n = int(self.path[4:])
            self.send_response(302); self.send_header("Location", "/cat.png" if n == 0 else f"/hop{n - 1}")
            self.send_header("Content-Length", "0"); self.end_headers(); return
        status, kind, body = routes[self.path]
        self.send_response(status); self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_address[1]}"
knobs = VisionSettings(allow_remote_images=True, allow_private_image_urls=True, max_remote_image_bytes=2048,
                       max_image_redirects=2, remote_image_timeout=5)
out = {}
for name in ("/cat.png", "/page", "/big.png", "/missing", "/hop1", "/hop2"):
    try:
        out[name] = ["ok", len(asyncio.run(load_image("part", base + name, knobs, 4096)))]
    except MediaError as exc:
        out[name] = [exc.status, exc.message]
print(json.dumps(out))
"""


def test_fetch_rules_against_a_local_image_server():
    done = subprocess.run([str(media_python()), "-c", FETCH_SCRIPT], cwd=SERVER_DIR, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["/cat.png"][0] == "ok" and out["/hop1"][0] == "ok"  # /hop1 -> /hop0 -> /cat.png: 2 redirects
    assert out["/page"][0] == 400 and "content type is 'text/html'" in out["/page"][1]
    assert out["/big.png"][0] == 413 and "MAX_REMOTE_IMAGE_BYTES=2048" in out["/big.png"][1]
    assert out["/missing"][0] == 400 and "HTTP 404" in out["/missing"][1]
    assert out["/hop2"][0] == 400 and "MAX_IMAGE_REDIRECTS=2" in out["/hop2"][1]


REBINDING_SCRIPT = r"""
import asyncio, http.server, io, json, socket, threading
from PIL import Image
from media_server.errors import MediaError
from media_server.vision.images import load_image
from media_server.vision.settings import VisionSettings

buffer = io.BytesIO(); Image.new("RGB", (8, 8)).save(buffer, "PNG"); PNG = buffer.getvalue()
hits = []

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_GET(self):
        hits.append(self.path)
        self.send_response(200); self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(PNG))); self.end_headers(); self.wfile.write(PNG)

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]
real_getaddrinfo, lookups = socket.getaddrinfo, []

def rebinding_dns(host, *args, **kwargs):
    # FAKE DNS for one name: a public address on the first lookup, loopback on every later one
    if (host.decode() if isinstance(host, bytes) else host) != "images.rebind.example":  # anyio sends IDNA bytes
        return real_getaddrinfo(host, *args, **kwargs)
    lookups.append(host)
    address = first_answer[0] if len(lookups) == 1 else "127.0.0.1"
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

first_answer = [""]
socket.getaddrinfo = rebinding_dns
knobs = VisionSettings(allow_remote_images=True, allow_private_image_urls=False, remote_image_timeout=3)
out = {}
# 192.0.2.0/24 (TEST-NET-1) is not global: refused; 93.184.216.34 is global: approved, then unreachable
for label, first in (("test-net", "192.0.2.10"), ("public", "93.184.216.34")):
    lookups.clear(); hits.clear(); first_answer[0] = first
    try:
        asyncio.run(load_image("part", f"http://images.rebind.example:{port}/cat.png", knobs, 64))
        out[label] = ["fetched", len(lookups), list(hits)]
    except MediaError as exc:
        out[label] = [exc.status, exc.message, len(lookups), list(hits)]
print(json.dumps(out))
"""


def test_a_host_that_rebinds_to_loopback_after_the_check_is_never_reached():
    """The connection goes to the address that was checked: one lookup, never a second that a
    rebinding DNS could answer with loopback."""
    done = subprocess.run([str(media_python()), "-c", REBINDING_SCRIPT], cwd=SERVER_DIR, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    status, message, lookups, hits = out["test-net"]
    assert status == 400 and "resolves to 192.0.2.10" in message and lookups == 1 and hits == []
    # a global first answer passes the check; the connection then goes to it (unreachable here),
    # not to the loopback server a second lookup would have named
    status, message, lookups, hits = out["public"]
    assert status == 400 and ("fetching the image failed" in message or "REMOTE_IMAGE_TIMEOUT" in message)
    assert lookups == 1 and hits == []


LITERAL_SCRIPT = r"""
import asyncio, json, time
from media_server.errors import MediaError
from media_server.vision import images
from media_server.vision.settings import VisionSettings

fetches = []

async def slow_first_fetch(where, url, knobs):
    # FAKE fetch: as slow as a first use on a busy host (importing httpx, building its TLS context)
    fetches.append(url)
    await asyncio.sleep(10)

images._fetch = slow_first_fetch
knobs = VisionSettings(allow_remote_images=True, allow_private_image_urls=False, remote_image_timeout=1)
out = {}
for url in ("http://127.0.0.1:1/cat.png", "http://[::1]:8080/x.png", "http://169.254.169.254/latest",
            "http://10.0.0.1/cat.png", "http://localhost:1/cat.png"):
    fetches.clear()
    started = time.monotonic()
    try:
        asyncio.run(images.load_image("part", url, knobs, 64))
    except MediaError as exc:
        out[url] = [exc.status, exc.message, len(fetches), round(time.monotonic() - started, 3)]
print(json.dumps(out))
"""


def test_an_address_literal_is_refused_before_any_fetch_starts():
    """A loopback/private/link-local IP in the URL is refused at once, never after a fetch's first-use
    costs ran out REMOTE_IMAGE_TIMEOUT (which answered "took too long" on a busy host); a host name is
    still judged when it is resolved, on connecting."""
    done = subprocess.run([str(media_python()), "-c", LITERAL_SCRIPT], cwd=SERVER_DIR, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for url, address in (("http://127.0.0.1:1/cat.png", "127.0.0.1"), ("http://[::1]:8080/x.png", "::1"),
                         ("http://169.254.169.254/latest", "169.254.169.254"), ("http://10.0.0.1/cat.png", "10.0.0.1")):
        status, message, fetches, seconds = out[url]
        assert status == 400 and f"resolves to {address}, a loopback/private/link-local" in message, out[url]
        assert fetches == 0 and seconds < 0.5, out[url]
    status, message, fetches, _ = out["http://localhost:1/cat.png"]  # a name: to the fetch, which timed out here
    assert status == 400 and "REMOTE_IMAGE_TIMEOUT=1 s" in message and fetches == 1
