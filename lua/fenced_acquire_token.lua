-- fenced_acquire_token: take or re-enter a Redisson RFencedLock and return the new
-- fencing token (Java's lockAndGetToken()/tryLockAndGetToken(), PROTOCOL.md 9).
-- KEYS[1]  lock hash N
-- KEYS[2]  token counter redisson_lock_token:{N} (STRING, no TTL, never deleted here)
-- ARGV[1]  lease in ms (>= 1)
-- ARGV[2]  owner field "<client-uuid>:<id>"
-- Returns  {-1, t}      acquired: t is the token (the counter after its INCR, >= 1),
--                       count + 1, TTL set to the lease
--          {pttl, -1}   held by another owner: the PTTL of N (a wait hint in ms; -1 for
--                       a hash without TTL)
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}
