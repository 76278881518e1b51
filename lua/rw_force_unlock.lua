-- rw_force_unlock: delete a Redisson RReadWriteLock held in the given mode, whoever
-- holds it (PROTOCOL.md 7.5). Left-over read timeout keys simply expire.
-- KEYS[1]  lock hash N
-- KEYS[2]  channel redisson_rwlock:{N}
-- ARGV[1]  message: "0" for the read lock, "1" for the write lock
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- ARGV[3]  the mode this force-unlock applies to: "read" or "write"
-- Returns  1  N was held in that mode and is deleted, ARGV[1] published; 0 otherwise
--          "<type>" (a string: "string", "list", ...)  N is not a hash: nothing deleted
--             (a hash without that mode is never deleted either: 0)
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
    return kind
end
if redis.call('hget', KEYS[1], 'mode') == ARGV[3] then
    redis.call('del', KEYS[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
