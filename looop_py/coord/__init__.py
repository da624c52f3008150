"""Coordination: claims, fencing, the pulse and the shared records, on files or on etcd.

The door that opens a work dir (coord/choose.py `open_workdir`) picks the backend
looop.toml names; the etcd one loads only then, so a beat on files never pays for it.
"""
