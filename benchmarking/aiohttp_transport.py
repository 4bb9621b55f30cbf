"""aiohttp-based transport with the same record semantics as the default RawTransport.

Kept for cross-checks (tests compare both on the same stub stream) and for servers behind
proxies/redirects that need a full HTTP client. It is slower (~380 us CPU per streamed request
here) and stamps a read when its coroutine resumes rather than in the protocol callback, so it is
not the default measuring instrument.
"""
from __future__ import annotations

import asyncio
import time

import aiohttp

from benchmarking.client import ClientConfig
from benchmarking.metrics import RequestRecord
from benchmarking.sse import finish_record


class AiohttpTransport:
    def __init__(self, cfg: ClientConfig, limit: int = 0):
        self.cfg = cfg
        self.url = cfg.base_url.rstrip("/") + cfg.endpoint
        self._session: aiohttp.ClientSession | None = None
        self.limit = limit
        self.active: set[asyncio.Task] = set()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=self.cfg.request_timeout_s, sock_read=self.cfg.stall_timeout_s,
                                            sock_connect=self.cfg.connect_timeout_s)
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self.limit, keepalive_timeout=60),
                                                  timeout=timeout)
        return self._session

    def abort_all(self, cls: str, msg: str) -> None:
        for task in list(self.active):
            task.cancel(msg=f"{cls}:{msg}")

    async def send(self, rec: RequestRecord, body: bytes) -> None:
        headers = {"Content-Type": "application/json", "x-request-id": rec.request_id}
        if self.cfg.api_key:
            headers["Authorization"] = f"Bearer {self.cfg.api_key}"
        task = asyncio.current_task()
        self.active.add(task)
        parts, stamps = [], []
        perf = time.perf_counter
        try:
            rec.send_time = perf()
            async with self._get_session().post(self.url, data=body, headers=headers) as resp:
                rec.status = resp.status
                rec.server_request_id = resp.headers.get("x-request-id")
                read = resp.content.readany
                while True:
                    data = await read()
                    if not data:
                        break
                    stamps.append(perf())
                    parts.append(data)
        except asyncio.CancelledError:
            rec.success, rec.error_class, rec.error = False, "budget_exceeded", "cancelled by the point budget"
            return
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            rec.success, rec.error_class, rec.error = False, "timeout", repr(exc)
            return
        except aiohttp.ClientConnectorError as exc:
            rec.success, rec.error_class, rec.error = False, "connect_error", repr(exc)
            return
        except (aiohttp.ClientError, ConnectionError) as exc:
            rec.success, rec.error_class, rec.error = False, "connection_reset", repr(exc)
            return
        finally:
            self.active.discard(task)
        if rec.status != 200:
            rec.success = False
            rec.error_class = "http_4xx" if 400 <= rec.status < 500 else "http_5xx" if rec.status >= 500 else "other"
            rec.error = f"HTTP {rec.status}: {b''.join(parts)[:300].decode('utf-8', 'replace')}"
            return
        finish_record(rec, parts, stamps, chat=self.cfg.chat, tokenizer=self.cfg.tokenizer, keep_text=self.cfg.keep_text)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
