-- rlock_acquire: take or re-enter a Redisson RLock (PROTOCOL.md 5.1).
-- KEYS[1]  lock hash N
-- ARGV[1]  lease in ms (>= 1)
-- ARGV[2]  owner field "<client-uuid>:<id>"
-- Returns  nil          acquired (count + 1, TTL set to the lease)
--          integer >= 0 held by another owner: the PTTL of N, a wait hint in ms
--          -1           held by another owner through a hash without TTL
--          error        e.g. WRONGTYPE when N is not a hash
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
