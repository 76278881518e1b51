-- ratelimiter_available: the permits a Redisson RRateLimiter has now (availablePermits()),
-- after giving back the permits of expired records.
-- KEYS[1]  config hash N
-- KEYS[2]  {N}:value            KEYS[3]  {N}:value:<client uuid>
-- KEYS[4]  {N}:permits          KEYS[5]  {N}:permits:<client uuid>
-- ARGV[1]  now: the caller's wall clock in epoch ms
-- Returns  integer  the permits available (Redisson answers a bulk string when nothing
--                   expired, an integer otherwise; this script always an integer), kept
--                   between rate - (permits still recorded) and the rate as in
--                   ratelimiter_try_acquire (Redisson's can exceed the rate after release)
--          error    "ERR RateLimiter is not initialized"
-- A value written here keeps the config's TTL (Redisson's SET drops the value's TTL, so the
-- value outlived an expiring limiter and a new one inherited it).
-- @include ratelimiter_config
local now = tonumber(ARGV[1])
-- @include ratelimiter_records
local value = redis.call('get', value_key)
local available
if value == false then
    reclaim(now)
    available = math.max(0, rate - used())
else
    value = tonumber(value)
    available = value + reclaim(now)
    if available < rate then
        available = math.max(available, rate - used())
    end
    available = math.min(available, rate)
end
if available ~= value then
    redis.call('set', value_key, available)
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', value_key, ttl)
    end
end
return available
