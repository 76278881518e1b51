-- fair_reenter (included by fair_acquire, fair_try_acquire, after fair_take_free): when
-- this caller already holds the fair lock, one hold more (TTL set to the lease again) and
-- nil from the script. Otherwise writes nothing and falls through.
-- Expects  KEYS[1]  lock hash N
--          ARGV[1]  lease in ms
--          ARGV[2]  owner field
-- Leaves   nothing defined.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
