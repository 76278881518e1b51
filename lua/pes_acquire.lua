-- pes_acquire: take permits of a permit-expirable semaphore, each under a new id
-- (Redisson's RPermitExpirableSemaphore acquire and tryAcquire; PROTOCOL.md 14). First
-- reclaims up to ARGV[1] permits whose deadline is at or before ARGV[3].
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  zset {N}:timeout (N:timeout when N has a '{'): permit id -> deadline
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  permits to take (an integer >= 1)
-- ARGV[2]  their deadline: the caller's wall clock (epoch ms) + lease, or ARGV[4]
-- ARGV[3]  now: the caller's wall clock, epoch ms
-- ARGV[4]  the no-lease deadline, 922337203685477
-- ARGV[5]  publish command, PUBLISH or SPUBLISH
-- ARGV[6..] one new permit id per permit (16 random bytes each)
-- Returns  "OK"  taken: N lowered by ARGV[1], each id added with score ARGV[2] (and when
--                N has a TTL, the zset gets it too)
--          ":<deadline>"  not enough permits: the lowest deadline in the zset, the time
--                when a permit expires (nothing else written)
--          nil  not enough permits, and none expires (no zset, or only unleased permits)
--          A reclaim publishes the new available count when it is above 0.
local timeouts, channel, now, publish = KEYS[2], KEYS[3], ARGV[3], ARGV[5]
local reclaim_limit = ARGV[1]
-- @include pes_reclaim
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    for i = 6, #ARGV do
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[1] ~= nil and first[2] ~= ARGV[4] then
    return ':' .. first[2]
end
return nil
