-- ratelimiter_set_rate: set or update a Redisson RRateLimiter's configuration
-- (setRate(RateLimiterArgs), updateRate(RateLimiterArgs)).
-- KEYS[1]  config hash N
-- KEYS[2]  {N}:value            KEYS[3]  {N}:value:<client uuid>
-- KEYS[4]  {N}:permits          KEYS[5]  {N}:permits:<client uuid>
-- ARGV[1]  rate (>= 1)          ARGV[2]  interval in ms (>= 1)
-- ARGV[3]  mode "0" / "1"       ARGV[4]  keep-alive in ms ("0" none)
-- ARGV[5]  now: the caller's wall clock in epoch ms
-- ARGV[6]  keep state "1": the value becomes max(0, rate - permits recorded in the last
--          interval); "0": the mode's value and records are deleted (a full budget)
-- ARGV[7]  "1": only update an existing limiter
-- Returns  1  set (the four fields written; with a keep-alive N gets it as TTL; a mode
--             change deletes all four state keys of this client)
--          0  ARGV[7] = "1" and N does not exist: nothing written
if ARGV[7] == '1' and redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local value_key, permits_key = KEYS[2], KEYS[4]
if ARGV[3] == '1' then
    value_key, permits_key = KEYS[3], KEYS[5]
end
local old_mode = redis.call('hget', KEYS[1], 'type')
redis.call('hset', KEYS[1], 'rate', ARGV[1])
redis.call('hset', KEYS[1], 'interval', ARGV[2])
redis.call('hset', KEYS[1], 'type', ARGV[3])
redis.call('hset', KEYS[1], 'keepAliveTime', ARGV[4])
if tonumber(ARGV[4]) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[4])
end
if old_mode ~= false and old_mode ~= ARGV[3] then
    redis.call('del', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
    return 1
end
if ARGV[6] == '0' then
    redis.call('del', value_key, permits_key)
    return 1
end
local rate, interval, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[5])
redis.call('zremrangebyscore', permits_key, 0, now - interval)
-- @include ratelimiter_records
redis.call('set', value_key, math.max(0, rate - used()))
-- @include ratelimiter_ttl
return 1
