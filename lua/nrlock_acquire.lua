-- nrlock_acquire: take a Redisson RNonReentrantLock (4.4+): the RLock's hash, field and
-- TTL, but a second acquire by the holder is refused instead of counted.
-- KEYS[1]  lock hash N
-- ARGV[1]  lease in ms (>= 1)
-- ARGV[2]  owner field "<client-uuid>:<id>"
-- ARGV[3]  the reentry error text, "NON_REENTRANT_REACQUIRE" (Redisson's)
-- Returns  nil          acquired: field = 1, TTL set to the lease
--          integer >= 0 held by another owner: the PTTL of N, a wait hint in ms
--          -1           held by another owner through a hash without TTL
--          error        "ERR NON_REENTRANT_REACQUIRE" (Redis 7.0 adds "ERR "): this owner
--                       holds it already; nothing written. Any other error (e.g. WRONGTYPE)
--                       is the server's.
local reentry_error = ARGV[3]
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
-- @include refuse_reentry
return redis.call('pttl', KEYS[1])
