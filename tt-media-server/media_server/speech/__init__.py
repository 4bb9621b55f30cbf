"""Speech to text: typed transcripts, response formats, streaming events, audio input, chunking."""
