"""An ``image_url`` part -> image bytes, safely: data: URLs decoded, http(s) URLs fetched under limits.

Every refusal is a ``BadInput`` (400) or ``PayloadTooLarge`` (413) naming the part
(``messages[1].content[0].image_url``), never a 500 and never a silent skip.

Fetch rules (``vision/settings.py``): http(s) only and only with ``ALLOW_REMOTE_IMAGES=1``; the
host's every resolved address must be global (not loopback, private, link-local, multicast,
reserved or unspecified) unless ``ALLOW_PRIVATE_IMAGE_URLS=1``, and the connection goes to the address
that was checked (one lookup per connection: no DNS-rebinding window); redirects are followed by hand,
at most ``MAX_IMAGE_REDIRECTS``, each new location checked by the same rules; the whole fetch
within ``REMOTE_IMAGE_TIMEOUT`` seconds; the body at most ``MAX_REMOTE_IMAGE_BYTES`` (read in
chunks, cut off past the cap); the answer must be 200 with an ``image/*`` content type; the
bytes must decode as an image within ``MAX_IMAGE_DIMENSION``.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import io
import ipaddress
import socket
import urllib.parse

from media_server.errors import BadInput, PayloadTooLarge
from media_server.vision.settings import VisionSettings


def check_image(field: str, data: bytes, max_dimension: int) -> tuple[int, int]:
    """Open the image header and check its size; BadInput / PayloadTooLarge naming the field.

    Here, with the kinds' image code, and not in the routes: the CNN route checks its uploads with
    it, and the vision chat checks every image_url part with it before a runner sees the bytes."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            image.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise BadInput(f"{field}: not a decodable image ({type(exc).__name__})") from None
    except Exception as exc:  # noqa: BLE001 - any decoder fault is bad input, never a 500
        raise BadInput(f"{field}: not a decodable image ({type(exc).__name__})") from None
    if width > max_dimension or height > max_dimension:
        raise PayloadTooLarge(f"{field}: image is {width}x{height}; the limit is "
                              f"{max_dimension}x{max_dimension} (MAX_IMAGE_DIMENSION)")
    if width < 1 or height < 1:
        raise BadInput(f"{field}: image has no pixels")
    return width, height


def _decode_data_url(where: str, url: str, limit: int) -> bytes:
    header, comma, payload = url.partition(",")
    if not comma:
        raise BadInput(f"{where}: a data: URL needs a comma before its data")
    media_type = header[5:].split(";")[0].strip().lower()
    if media_type and not media_type.startswith("image/"):
        raise BadInput(f"{where}: data: URL of type {media_type!r}; expected image/*")
    if ";base64" not in header.lower():
        raise BadInput(f"{where}: only base64 data: URLs are accepted (data:image/png;base64,...)")
    if len(payload) > (limit * 4) // 3 + 8:
        raise PayloadTooLarge(f"{where}: the image is over MAX_REMOTE_IMAGE_BYTES={limit}")
    try:
        return base64.b64decode(payload.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(f"{where}: the data: URL is not valid base64") from None


def _check_url(where: str, url: str) -> None:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https"):
        raise BadInput(f"{where}: only http(s) and data: image URLs are accepted, got {parsed.scheme or 'none'!r}")
    if not parsed.hostname:
        raise BadInput(f"{where}: the URL names no host")


def checked_address(where: str, host: str, port: int) -> str:
    """The address to connect to for ``host``: every address it resolves to must be global, and the
    connection goes to the one checked here, so a second lookup (DNS rebinding) cannot swap in a
    private one between the check and the connection."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise BadInput(f"{where}: cannot resolve host {host!r} ({exc})") from None
    if not infos:
        raise BadInput(f"{where}: host {host!r} resolves to no address")
    for info in infos:
        _refuse_if_not_global(where, host, ipaddress.ip_address(info[4][0].split("%")[0]))
    return infos[0][4][0]


def _refuse_if_not_global(where: str, host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    if not address.is_global:
        raise BadInput(f"{where}: host {host!r} resolves to {address}, a loopback/private/link-local "
                       "address; refused (ALLOW_PRIVATE_IMAGE_URLS=1 allows it)")


def _refuse_literal_address(where: str, url: str) -> None:
    """A URL whose host is an IP address is judged before any fetch starts. Why: that needs no lookup
    and no connection, and a refusal must not wait on the fetch's first-use costs (importing httpx,
    building its TLS context: seconds on a busy host), which could otherwise run out
    REMOTE_IMAGE_TIMEOUT and answer "took too long" for an address that is simply refused."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return  # a name: checked when it is resolved, on connecting (checked_address)
    _refuse_if_not_global(where, host, address)


def _pinned_transport(where: str):
    """An httpx transport whose every TCP connection goes to an address ``checked_address`` just
    approved (TLS still verifies and sends the URL's host name: only the lookup is ours)."""
    import httpcore
    import httpx

    class GlobalAddressBackend(httpcore.AsyncNetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore.AnyIOBackend()

        async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            address = await asyncio.to_thread(checked_address, where, host, port)
            return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    transport = httpx.AsyncHTTPTransport()
    # httpx builds its pool without a network_backend argument; the pool is rebuilt with ours (same
    # TLS context) rather than reimplementing the request/response mapping (httpx 0.28, pinned).
    transport._pool = httpcore.AsyncConnectionPool(ssl_context=transport._pool._ssl_context,
                                                   network_backend=GlobalAddressBackend())
    return transport


async def _fetch(where: str, url: str, knobs: VisionSettings) -> bytes:
    import httpx

    limit = knobs.max_remote_image_bytes
    transport = None if knobs.allow_private_image_urls else _pinned_transport(where)
    async with httpx.AsyncClient(follow_redirects=False, timeout=knobs.remote_image_timeout,
                                 transport=transport) as client:
        for _ in range(knobs.max_image_redirects + 1):
            _check_url(where, url)
            async with client.stream("GET", url, headers={"Accept": "image/*"}) as response:
                if response.is_redirect:
                    location = response.headers.get("location")
                    if not location:
                        raise BadInput(f"{where}: redirect {response.status_code} without a Location")
                    url = urllib.parse.urljoin(url, location)
                    continue
                if response.status_code != 200:
                    raise BadInput(f"{where}: fetching the image answered HTTP {response.status_code}")
                content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if not content_type.startswith("image/"):
                    raise BadInput(f"{where}: the URL's content type is {content_type or 'missing'!r}; "
                                   "expected image/*")
                declared = response.headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > limit:
                    raise PayloadTooLarge(f"{where}: the image is {declared} bytes; over "
                                          f"MAX_REMOTE_IMAGE_BYTES={limit}")
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise PayloadTooLarge(f"{where}: the image is over MAX_REMOTE_IMAGE_BYTES={limit}")
                    chunks.append(chunk)
                return b"".join(chunks)
    raise BadInput(f"{where}: more than MAX_IMAGE_REDIRECTS={knobs.max_image_redirects} redirects")


async def load_image(where: str, url: str, knobs: VisionSettings, max_dimension: int) -> bytes:
    """The image bytes of one ``image_url`` part, checked to decode; 400/413 naming ``where`` otherwise."""
    if not isinstance(url, str) or not url:
        raise BadInput(f"{where}: expected a non-empty URL string")
    if url[:5].lower() == "data:":
        data = _decode_data_url(where, url, knobs.max_remote_image_bytes)
    elif url.split(":", 1)[0].lower() in ("http", "https"):
        if not knobs.allow_remote_images:
            raise BadInput(f"{where}: http(s) image URLs are refused here (ALLOW_REMOTE_IMAGES=0); "
                           "send the image as a data: URL")
        _check_url(where, url)
        if not knobs.allow_private_image_urls:
            _refuse_literal_address(where, url)
        try:
            data = await asyncio.wait_for(_fetch(where, url, knobs), timeout=knobs.remote_image_timeout)
        except (asyncio.TimeoutError, TimeoutError):
            raise BadInput(f"{where}: fetching the image took over REMOTE_IMAGE_TIMEOUT="
                           f"{knobs.remote_image_timeout:g} s") from None
        except Exception as exc:  # noqa: BLE001 - transport faults are the URL's problem, named
            from media_server.errors import MediaError

            if isinstance(exc, MediaError):
                raise
            raise BadInput(f"{where}: fetching the image failed ({type(exc).__name__}: {exc})") from None
    else:
        raise BadInput(f"{where}: only http(s) and data: image URLs are accepted")
    if len(data) > knobs.max_remote_image_bytes:
        raise PayloadTooLarge(f"{where}: the image is {len(data)} bytes; over "
                              f"MAX_REMOTE_IMAGE_BYTES={knobs.max_remote_image_bytes}")
    check_image(where, data, max_dimension)
    return data
