"""Who may use the server: its users, their access keys and login tokens, and the secret sealing them.

- :mod:`server.auth.users`: the values: :class:`~server.auth.users.User` (its groups, policies,
  incarnation and grant epoch), :class:`~server.auth.users.Role`, credentials.
- :mod:`server.auth.store`: :class:`~server.auth.store.Auth`, the users and access keys of one
  server in the KV store (encrypted secrets, grant epochs, set-up).
- :mod:`server.auth.tokens`: login tokens (JWT, HS256) and their revocation at sign-out.
- :mod:`server.auth.secret`: the server's secret and the keys derived from it.

Key layout (kept here, in :mod:`server.groups` and :mod:`server.external_principals`, apart from
the lake's ``lakectl.core.keys``):

    auth/meta         key "setup"              → the first admin's user id (set once, by CAS)
    auth/users        key <user id>            → {"id", "creation_date", "incarnation", "epoch",
                                                  "groups": {<group id>: <its incarnation>},
                                                  "policies": {<policy id>: <its incarnation>}}
    auth/credentials  key <access key id>      → {"access_key_id", "user_id", "user_incarnation",
                                                  "creation_date", "secret": Fernet token}
    auth/revoked      key sha256 hex of a token → its expiry (Unix seconds, text): signed out

The first three are :mod:`server.auth.store`'s, the last :mod:`server.auth.tokens`'. Every
change the server makes of a partition under ``auth/`` goes through the lake's events
(:func:`server.auth.store.lake_auth`): with the lake's journal on, it is journalled as stored, so
that a lake rebuilt from its journal has its users back, for a server with the same secret
(:mod:`lakectl.core.journal.records`). Partitions of the server's that are not under ``auth/``
(the UI's ``ui/links``, ``ui/ended``) are not journalled.

``incarnation`` is random per created user: access keys, login tokens and signed block locators
name it (:attr:`User.signing_token <server.auth.users.User.signing_token>`), so a key, token or
signature left over from a deleted user never works for a later user of the same name.

``epoch`` is the user's grant epoch: random, replaced (by compare-and-swap on the user's record)
whenever what the user may do or how it signs in changes: its groups, its policies, its access
keys and AWS identities (external principals), and the policies of its groups (a policy edited,
deleted, attached to or detached from a group it is in, or the group deleted). Signed block
locators, receipts and block challenges name it (:attr:`User.grant_token
<server.auth.users.User.grant_token>`): a signature made under grants since changed claims
nothing. It lives in the record a request loads anyway, so checking it costs no read.
"""
