-- fenced_acquire: take or re-enter a Redisson RFencedLock without returning the token
-- (Java's lock()/tryLock(), PROTOCOL.md 9). Every success, re-entry included, raises the
-- token counter.
-- KEYS[1]  lock hash N
-- KEYS[2]  token counter redisson_lock_token:{N} (STRING, no TTL, never deleted here)
-- ARGV[1]  lease in ms (>= 1)
-- ARGV[2]  owner field "<client-uuid>:<id>"
-- Returns  nil          acquired (token + 1, count + 1, TTL set to the lease)
--          integer >= 0 held by another owner: the PTTL of N, a wait hint in ms
--          -1           held by another owner through a hash without TTL
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
