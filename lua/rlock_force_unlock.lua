-- rlock_force_unlock: delete an RLock whoever holds it (PROTOCOL.md 5.3).
-- KEYS[1]  lock hash N
-- KEYS[2]  channel redisson_lock__channel:{N}
-- ARGV[1]  message to publish ("0")
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  1  N existed and was deleted; ARGV[1] published
--          0  N did not exist; nothing published
--          "<type>" (a string: "string", "list", "hash", ...)  N is not a lock (another
--             type, or a hash with a field that is not an owner's, or over 64 fields):
--             nothing deleted, nothing published. Redisson deletes whatever is there.
-- @include lock_hash_guard
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
