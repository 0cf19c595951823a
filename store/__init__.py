"""store: the etcd analog, a Raft-replicated LevelDB-durable MVCC key-value store."""
