"""One transcription over the scheduler: chunks fanned out to the audio workers, results put back in order.

Why here and not in the route: the same fan-out serves the OpenAI routes, the legacy route and
the benchmark, streaming or not. Why not in ``speech/``: that package is audio code the whisper
runners use too, below the scheduler; this fan-out runs over the scheduler, so it sits above it.
Every chunk is its own streaming request, so the workers share a long upload; a streaming client
gets chunk 0's segments as soon as they are decoded, then chunk 1's (already waiting, decoded in
parallel), and so on; a non-streaming client gets the joined transcript. Leaving early (client
gone, one chunk failed) cancels every other chunk.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import AsyncIterator

import numpy as np

from media_server.errors import MediaError
from media_server.scheduler import Scheduler
from media_server.speech.chunking import (MIN_CHUNK_SECONDS, AudioChunk, chunk_seconds_for, join_transcripts,
                                          place_segments, plan_chunks)
from media_server.speech.diarization import SpeakerTurn, split_by_speaker
from media_server.speech.records import Segment, Transcript, TranscriptionOptions

KIND = "audio"
_END = object()


@dataclass(frozen=True)
class TranscriptionJob:
    """A decoded upload on its way to the workers."""

    model_id: str
    samples: np.ndarray
    duration_seconds: float
    options: TranscriptionOptions
    chunks: tuple[AudioChunk, ...]
    turns: tuple[SpeakerTurn, ...] = ()  # diarized speaker turns (preprocessing on): segments get speakers

    def labelled(self, segment: Segment) -> list[Segment]:
        """The segment as the client gets it: cut at speaker changes and labelled when diarized."""
        return split_by_speaker(segment, list(self.turns)) if self.turns else [segment]


def chunk_seconds(scheduler: Scheduler, model_id: str, duration_seconds: float, streaming: bool) -> float:
    """Chunk length for the workers that are warm now (short chunks when streaming: earlier text)."""
    workers = max(1, len(scheduler.pool(model_id, KIND).ready_workers()))
    return MIN_CHUNK_SECONDS if streaming else chunk_seconds_for(duration_seconds, workers)


def plan_job(scheduler: Scheduler, model_id: str, samples: np.ndarray, duration_seconds: float,
             options: TranscriptionOptions, streaming: bool, chunks: list[AudioChunk] | None = None,
             turns: list[SpeakerTurn] | None = None) -> TranscriptionJob:
    """The job for these samples: `chunks` when preprocessing planned them (speech only), else the
    whole audio cut at quiet points; `turns` label the segments with speakers."""
    if chunks is None:
        chunks = plan_chunks(samples, chunk_seconds(scheduler, model_id, duration_seconds, streaming))
    return TranscriptionJob(model_id, samples, duration_seconds, options, tuple(chunks), tuple(turns or ()))


def _chunk_deadline(scheduler: Scheduler, job: TranscriptionJob, chunk: AudioChunk) -> float:
    """Later chunks wait for earlier ones on busy workers; their deadline grows with their place in line."""
    workers = max(1, len(scheduler.pool(job.model_id, KIND).ready_workers()))
    return scheduler.settings.default_inference_timeout_seconds * (1 + chunk.index // workers)


async def _run_chunk(scheduler: Scheduler, job: TranscriptionJob, chunk: AudioChunk,
                     sink: asyncio.Queue | None = None) -> Transcript:
    """Transcribe one chunk; segments also go to `sink` as they arrive (streaming)."""
    payload = {"samples": chunk.samples_of(job.samples), "options": job.options.to_dict()}
    segments: list[Segment] = []
    language = job.options.language or "en"
    async for event in scheduler.stream(job.model_id, KIND, payload, _chunk_deadline(scheduler, job, chunk)):
        if event.type == "chunk":
            segment = Segment.from_dict(event.data)
            segments.append(segment)
            if sink is not None:
                sink.put_nowait(segment)
        elif event.type == "done" and isinstance(event.data, dict):
            language = str(event.data.get("language") or language)
    return Transcript(language=language, duration=chunk.duration_seconds, segments=segments, task=job.options.task)


async def transcribe(scheduler: Scheduler, job: TranscriptionJob) -> Transcript:
    """The whole transcript; the first failing chunk cancels the others and its error is raised."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_run_chunk(scheduler, job, chunk)) for chunk in job.chunks]
    except BaseExceptionGroup as failures:
        raise _first_failure(failures) from None
    joined = join_transcripts(list(job.chunks), [task.result() for task in tasks], job.duration_seconds)
    if job.turns:
        pieces = [piece for segment in joined.segments for piece in job.labelled(segment)]
        joined.segments = [piece.shifted(0.0, index) for index, piece in enumerate(pieces)]
    return joined


def _first_failure(failures: BaseExceptionGroup) -> BaseException:
    """The error to report for a failed transcription: a MediaError (its status) if any chunk gave one."""
    leaves: list[BaseException] = []
    pending = [failures]
    while pending:
        for error in pending.pop().exceptions:
            if isinstance(error, BaseExceptionGroup):
                pending.append(error)
            else:
                leaves.append(error)
    return next((error for error in leaves if isinstance(error, MediaError)), leaves[0])


async def stream_segments(scheduler: Scheduler, job: TranscriptionJob) -> AsyncIterator[Segment]:
    """Segments in audio order (times in the whole audio) while the chunks run in parallel."""
    sinks = [asyncio.Queue() for _ in job.chunks]

    async def run(chunk: AudioChunk) -> None:
        try:
            await _run_chunk(scheduler, job, chunk, sinks[chunk.index])
            sinks[chunk.index].put_nowait(_END)
        except BaseException as error:  # handed to the reader, who raises it in order
            sinks[chunk.index].put_nowait(error)
            if not isinstance(error, Exception):
                raise

    tasks = [asyncio.ensure_future(run(chunk)) for chunk in job.chunks]
    try:
        next_id = 0
        for chunk in job.chunks:
            while True:
                item = await sinks[chunk.index].get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                for piece in job.labelled(place_segments(chunk, [item], 0)[0]):
                    yield piece.shifted(0.0, next_id)
                    next_id += 1
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

