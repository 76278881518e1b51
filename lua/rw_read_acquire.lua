-- rw_read_acquire: take a read hold of a Redisson RReadWriteLock (PROTOCOL.md 7.1).
-- KEYS[1]  lock hash N
-- KEYS[2]  timeout key base T = <P>:<owner field>:rwlock_timeout (hold i is T:i)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field F
-- ARGV[3]  the same owner's write field F:write (a writer may also read: downgrade)
-- Returns  nil      acquired: F + 1 = c, T:c = 1 with TTL = lease, N's TTL >= lease
--          integer  held for writing by another owner: the PTTL of N
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1)
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local key = KEYS[2] .. ':' .. count
    redis.call('set', key, 1)
    redis.call('pexpire', key, ARGV[1])
    local remaining = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(remaining, tonumber(ARGV[1])))
    return nil
end
return redis.call('pttl', KEYS[1])
