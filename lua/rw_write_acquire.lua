-- rw_write_acquire: take the write hold of a Redisson RReadWriteLock (PROTOCOL.md 7.3).
-- KEYS[1]  lock hash N
-- ARGV[1]  lease in ms
-- ARGV[2]  write field W = <owner field>:write
-- Returns  nil      acquired; re-entry adds the lease to the remaining TTL (as Redisson)
--          integer  held by someone else (readers, or another writer): the PTTL of N
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local remaining = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], remaining + tonumber(ARGV[1]))
    return nil
end
return redis.call('pttl', KEYS[1])
