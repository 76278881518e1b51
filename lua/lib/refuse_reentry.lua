-- refuse_reentry (included by the non-reentrant acquires: nrlock_acquire, nrfair_acquire,
-- nrfair_try_acquire): when this caller already holds the lock, the script ends with the
-- error reply reentry_error (Redisson sends "NON_REENTRANT_REACQUIRE"; Redis 7.0 answers
-- "-ERR NON_REENTRANT_REACQUIRE"). Nothing is written: the hold stays, its TTL too.
-- Expects  KEYS[1]              lock hash N
--          ARGV[2]              owner field
--          local reentry_error  the error text (its ARGV string)
-- Leaves   nothing defined.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return redis.error_reply(reentry_error)
end
