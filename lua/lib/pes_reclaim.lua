-- pes_reclaim (included by the pes_* scripts that reclaim first): give back to a
-- permit-expirable semaphore the permits whose deadline is at or before now (Redisson's
-- clean-up prelude): their ids leave the zset, N is raised by their number, and the new
-- count is published when above 0.
-- Expects  KEYS[1]              N, a string holding the available count
--          local timeouts       zset {N}:timeout: permit id -> deadline
--          local channel        channel redisson_sc:{N}
--          local now            the caller's wall clock in epoch ms (its ARGV string)
--          local publish        publish command, PUBLISH or SPUBLISH
--          local reclaim_limit  most ids reclaimed (-1: all)
-- Leaves   local expired: the ids reclaimed (a table, maybe empty)
--          local available: N's count after a reclaim (an integer), nil when none expired
local expired = redis.call('zrangebyscore', timeouts, 0, now, 'limit', 0, reclaim_limit)
local available
if #expired > 0 then
    redis.call('zrem', timeouts, unpack(expired))
    available = redis.call('incrby', KEYS[1], #expired)
    if available > 0 then
        redis.call(publish, channel, available)
    end
end
