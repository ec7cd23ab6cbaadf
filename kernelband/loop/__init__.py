"""The generation loop's memory in the scheduler: duplicates, repair turns, transcripts,
lineage memory and the team skill library. Called from the engine's ingest and payload steps;
every function works inside the caller's transaction."""
