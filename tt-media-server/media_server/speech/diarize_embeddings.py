"""The offline diarization backend: voice-encoder embeddings of short windows, clustered into speakers.

Why this design: it needs nothing but wheels. The voice encoder is Resemblyzer's (a 3-layer LSTM
over 40 mel bands trained for speaker verification; its weights ship in the ``resemblyzer``
wheel), the clustering is scikit-learn's k-means clustering, and the
speech regions come from the Silero VAD. Steps:

1. windows of ``WINDOW_SECONDS`` every ``HOP_SECONDS`` inside each speech region (a region shorter
   than one window is one window), one embedding each, computed in one batch;
2. clustering (``cluster``): window embeddings averaged over pieces of a few seconds, k-means
   with the requested number of speakers, or the count in min..max with the best silhouette;
3. every 10 ms frame of speech takes the label of the window whose centre is nearest; runs shorter
   than ``MIN_TURN_SECONDS`` join their neighbour (a speaker does not change for a syllable);
4. turns are the runs, labelled A, B, ... in order of first appearance.

Overlapped speech gets one speaker (the one the window hears most). Cost grows linearly with the
speech duration (the LSTM runs over every window once); ``scripts/bench_speech_preprocessing.py`` measures
the real-time factor.
"""

from __future__ import annotations

import threading

import numpy as np

from media_server.speech.chunking import SAMPLE_RATE
from media_server.speech.diarization import (DiarizationError, SpeakerCount, SpeakerTurn, relabel_in_order)
from media_server.speech.vad import SpeechRegion

WINDOW_SECONDS = 1.5
HOP_SECONDS = 0.25
MIN_TURN_SECONDS = 0.5
PIECE_SECONDS = 3.0
#: Two clusters whose weighted centroids are closer than this (cosine distance) are one voice. On the
#: project's espeak-ng audio one voice split in two gives 0.04-0.06, the closest pair of distinct
#: voices 0.064 and the others 0.2-0.3: a thin margin, and the reason a client that knows the count
#: should send it (num_speakers, min_speakers).
MIN_SPEAKER_DISTANCE = 0.06
FRAME_SECONDS = 0.01  # the encoder's mel hop
BATCH_WINDOWS = 64


class EmbeddingDiarizer:
    """Resemblyzer embeddings + k-means clustering; thread-safe (one diarization at a time)."""

    name = "embeddings"

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._encoder = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the encoder (imports torch and librosa: a second or two, once)."""
        if self._encoder is not None:
            return
        try:
            import warnings

            import torch
            with warnings.catch_warnings():  # webrtcvad, imported by resemblyzer, warns about pkg_resources
                warnings.simplefilter("ignore")
                from resemblyzer import VoiceEncoder
        except ImportError as error:
            raise DiarizationError(f"the offline diarization backend needs the resemblyzer package "
                                   f"(requirements/media-server.txt): {error}") from None
        if self.threads:
            torch.set_num_threads(self.threads)
        self._encoder = VoiceEncoder(device="cpu", verbose=False)
        # The first mel spectrogram compiles librosa's numba kernels (seconds): pay it here, not in a request.
        tone = np.sin(np.arange(2 * SAMPLE_RATE, dtype=np.float32) * (2 * np.pi * 220 / SAMPLE_RATE)) * 0.1
        self.embed_windows(tone, [(0, len(tone))])

    def embed_windows(self, samples: np.ndarray, windows: list[tuple[int, int]]) -> np.ndarray:
        """One L2-normalised embedding per (start, end) sample window."""
        import torch
        from resemblyzer import wav_to_mel_spectrogram

        mel = wav_to_mel_spectrogram(np.asarray(samples, dtype=np.float32))  # frames x 40, 10 ms hop
        hop = int(FRAME_SECONDS * SAMPLE_RATE)
        pieces = []
        for first in range(0, len(windows), BATCH_WINDOWS):
            batch = windows[first:first + BATCH_WINDOWS]
            length = max(1, max((end - start) // hop for start, end in batch))
            frames = np.zeros((len(batch), length, mel.shape[1]), dtype=np.float32)
            for row, (start, end) in enumerate(batch):
                piece = mel[start // hop:start // hop + max(1, (end - start) // hop)]
                frames[row, length - len(piece):] = piece  # left-pad: the LSTM's last state sees the speech last
            with torch.no_grad():
                pieces.append(self._encoder(torch.from_numpy(frames)).numpy())
        return np.concatenate(pieces) if pieces else np.zeros((0, 256), dtype=np.float32)

    def diarize(self, samples: np.ndarray, regions: list[SpeechRegion], count: SpeakerCount) -> list[SpeakerTurn]:
        with self._lock:
            self.load()
            windows = speech_windows(regions)
            if not windows:
                return []
            embeddings = self.embed_windows(samples, windows)
            labels = cluster(embeddings, speech_pieces(regions, windows), count)
            return relabel_in_order(frame_turns(regions, windows, labels))


def speech_windows(regions: list[SpeechRegion]) -> list[tuple[int, int]]:
    """(start, end) sample windows covering every region, WINDOW_SECONDS long every HOP_SECONDS."""
    size, hop = int(WINDOW_SECONDS * SAMPLE_RATE), int(HOP_SECONDS * SAMPLE_RATE)
    windows = []
    for region in regions:
        length = region.end - region.start
        if length <= size:
            windows.append((region.start, region.end))
            continue
        starts = list(range(region.start, region.end - size + 1, hop))
        if starts[-1] + size < region.end:
            starts.append(region.end - size)
        windows.extend((start, start + size) for start in starts)
    return windows


def speech_pieces(regions: list[SpeechRegion], windows: list[tuple[int, int]]) -> list[list[int]]:
    """Window indices grouped into pieces: consecutive windows of one region whose centres lie
    within PIECE_SECONDS of the piece's first centre."""
    centres = [(start + end) / 2 / SAMPLE_RATE for start, end in windows]
    groups: list[list[int]] = []
    for region in regions:
        current: list[int] = []
        for index, (start, end) in enumerate(windows):
            if not (start < region.end and end > region.start):
                continue
            if current and centres[index] - centres[current[0]] > PIECE_SECONDS:
                groups.append(current)
                current = []
            current.append(index)
        if current:
            groups.append(current)
    return groups


def cluster(embeddings: np.ndarray, pieces: list[list[int]], count: SpeakerCount) -> np.ndarray:
    """A speaker index per window embedding, honouring the requested speaker count.

    Windows are averaged into pieces (a piece is a few seconds of one speech region, so it is
    almost always one speaker, and its mean embedding is far less noisy than one window's); the
    pieces are clustered with k-means weighted by their window count, k the requested count or,
    when free, the k in min..max whose clustering has the best mean silhouette (cosine); one
    speaker when one is allowed and the two centroids of the best split are closer than
    MIN_SPEAKER_DISTANCE. Each window then takes its nearest centroid.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    if len(embeddings) == 0:
        return np.zeros(0, dtype=int)
    means = np.stack([embeddings[group].mean(axis=0) for group in pieces])
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    weights = np.array([len(group) for group in pieces], dtype=float)
    fewest, most = count.bounds()
    most = min(most, len(means))
    fewest = min(fewest, most)

    def fit(k: int) -> np.ndarray:
        if k <= 1:
            return np.zeros(len(means), dtype=int)
        return KMeans(n_clusters=k, n_init=10, random_state=0).fit_predict(means, sample_weight=weights)

    def centroids_of(labels: np.ndarray) -> np.ndarray:
        names = sorted(set(labels.tolist()))
        found = np.stack([np.average(means[labels == name], axis=0, weights=weights[labels == name])
                          for name in names])
        return found / np.linalg.norm(found, axis=1, keepdims=True)

    if fewest == most:
        labels = fit(most)
    elif len(means) < 3 or (fewest <= 1 and _split_distance(centroids_of(fit(2))) < MIN_SPEAKER_DISTANCE):
        labels = fit(max(1, fewest))
    else:
        best_score, labels = -1.0, fit(max(2, fewest))
        for k in range(max(2, fewest), min(most, len(means) - 1) + 1):
            candidate = fit(k)
            score = silhouette_score(means, candidate, metric="cosine")
            if score > best_score:
                best_score, labels = score, candidate
    names = sorted(set(labels.tolist()))
    centroids = np.stack([means[labels == name].mean(axis=0) for name in names])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    return np.argmax(embeddings @ centroids.T, axis=1)


def _split_distance(centroids: np.ndarray) -> float:
    """Cosine distance between the two centroids of a two-way split."""
    return float(1.0 - centroids[0] @ centroids[1]) if len(centroids) == 2 else 0.0


def frame_turns(regions: list[SpeechRegion], windows: list[tuple[int, int]], labels: np.ndarray) -> list[SpeakerTurn]:
    """Speaker turns from window labels: each speech frame takes its nearest window's label, short
    runs join a neighbour."""
    hop = int(FRAME_SECONDS * SAMPLE_RATE)
    centres = np.array([(start + end) / 2 for start, end in windows])
    turns: list[SpeakerTurn] = []
    for region in regions:
        frames = np.arange(region.start, region.end, hop) + hop / 2
        inside = np.flatnonzero([(start < region.end and end > region.start) for start, end in windows])
        if len(frames) == 0 or len(inside) == 0:
            continue
        nearest = inside[np.argmin(np.abs(frames[:, None] - centres[inside][None, :]), axis=1)]
        runs = _runs(labels[nearest].tolist())
        runs = _absorb_short(runs, int(MIN_TURN_SECONDS / FRAME_SECONDS))
        for label, first, last in runs:
            start = region.start + first * hop
            end = min(region.end, region.start + (last + 1) * hop)
            turns.append(SpeakerTurn(str(label), start / SAMPLE_RATE, end / SAMPLE_RATE))
    return turns


def _runs(values: list[int]) -> list[tuple[int, int, int]]:
    """(value, first index, last index) of each run of equal values."""
    runs: list[tuple[int, int, int]] = []
    for index, value in enumerate(values):
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1], index)
        else:
            runs.append((value, index, index))
    return runs


def _absorb_short(runs: list[tuple[int, int, int]], min_frames: int) -> list[tuple[int, int, int]]:
    """Runs shorter than `min_frames` join the longer of their neighbours (repeated until none is left)."""
    runs = list(runs)
    while len(runs) > 1:
        lengths = [last - first + 1 for _, first, last in runs]
        shortest = int(np.argmin(lengths))
        if lengths[shortest] >= min_frames:
            break
        left = shortest - 1 if shortest > 0 else None
        right = shortest + 1 if shortest + 1 < len(runs) else None
        target = left if right is None or (left is not None and lengths[left] >= lengths[right]) else right
        value = runs[target][0]
        first = min(runs[target][1], runs[shortest][1])
        last = max(runs[target][2], runs[shortest][2])
        low, high = sorted((target, shortest))
        runs[low:high + 1] = [(value, first, last)]
        # neighbours may now share a label: merge them
        merged: list[tuple[int, int, int]] = []
        for run in runs:
            if merged and merged[-1][0] == run[0]:
                merged[-1] = (run[0], merged[-1][1], run[2])
            else:
                merged.append(run)
        runs = merged
    return runs
