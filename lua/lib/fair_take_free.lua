-- fair_take_free (included by fair_acquire, fair_try_acquire, nrfair_acquire,
-- nrfair_try_acquire): take a free fair lock when the queue is empty or headed by this
-- caller, and return nil from the script. Otherwise writes nothing and falls through.
-- Expects  KEYS[1]     lock hash N
--          KEYS[2]     queue redisson_lock_queue:{N}
--          KEYS[3]     deadlines redisson_lock_timeout:{N}
--          ARGV[1]     lease in ms
--          ARGV[2]     owner field
--          local wait  this caller's wait in ms (its ARGV string), taken off every remaining
--                      waiter's deadline when it takes the lock
-- Leaves   nothing defined.
if (redis.call('exists', KEYS[1]) == 0) and
    ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    -- Everyone still queued moves up by this caller's wait.
    local rest = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #rest do
        redis.call('zincrby', KEYS[3], -tonumber(wait), rest[i])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
