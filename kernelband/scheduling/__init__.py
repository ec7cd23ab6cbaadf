"""The scheduler: jobs, tracks and attempts move through select -> dispatch -> ingest -> update.

`pipeline.step` is one pass, readable top to bottom; every other module holds one part of it
(docs/module-contracts.md lists them). Import from the module that holds a name: this package
re-exports nothing, so importing one part (e.g. `events` from kernelband.loop) loads no other.
"""
