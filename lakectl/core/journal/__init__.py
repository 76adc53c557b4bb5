"""The journal (docs/decisions/0009-journal.md): every mutation of a lake recorded, sealed and
replayed. Callers import the module whose names they use; this package re-exports nothing.

- :mod:`.journal`: the event sink that records each verb (intent, outcome), its writers, and
  the lake's setting (``enable``, ``disable``, ``install``, ``flush``); it also offers the
  sealed journal's readers from :mod:`.seal` (``tail``, ``entries``, ``follow``).
- :mod:`.form`: how a live entry is stored in its writer's KV partition.
- :mod:`.log`: the log of acknowledged entries in the block store, before they are sealed.
- :mod:`.seal`: done entries sealed as Parquet batches, and read back.
- :mod:`.compact`: a rewrite without the entries a replay no longer needs.
- :mod:`.recovery`: the intents a dead writer left open, decided from the lake.
- :mod:`.rebuild`: a fresh metadata database from the blocks and the sealed journal.
- :mod:`.replayorder`: what an entry says so that a rebuild replays concurrent writers in order.
- :mod:`.records`: a server's auth records, journalled as stored and stored again by a rebuild.
"""
