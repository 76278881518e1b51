-- ratelimiter_release: give permits back to a Redisson RRateLimiter (release(permits)).
-- Not idempotent: never resent after a lost reply.
-- KEYS[1]  config hash N
-- KEYS[2]  {N}:value            KEYS[3]  {N}:value:<client uuid>
-- KEYS[4]  {N}:permits          KEYS[5]  {N}:permits:<client uuid>
-- ARGV[1]  permits to give back (>= 1)
-- Returns  nil    the value raised by the permits, at most to the rate; then the TTL rule
--          error  "ERR RateLimiter is not initialized"
-- Redisson 4.7 leaves the permit records, which give the same permits back a second time
-- when they expire. credisson takes them off the records, newest first (the permits most
-- likely returned; the release has no clock to tell live records from expired ones), so a
-- Java client reading the state counts them once.
-- @include ratelimiter_config
-- @include ratelimiter_records
local give = tonumber(ARGV[1])
-- A missing value is the rate less what is recorded (Redisson: the rate), read before the
-- records give the permits up.
local value = redis.call('get', value_key)
if value == false then
    value = math.max(0, rate - used())
else
    value = tonumber(value)
end
local left = give
local records = redis.call('zrevrange', permits_key, 0, -1, 'withscores')
for i = 1, #records, 2 do
    if left <= 0 then
        break
    end
    local member = records[i]
    local random, permits = struct.unpack('Bc0I', member)
    redis.call('zrem', permits_key, member)
    if permits > left then
        redis.call('zadd', permits_key, records[i + 1],
            struct.pack('Bc0I', string.len(random), random, permits - left))
        left = 0
    else
        left = left - permits
    end
end
redis.call('set', value_key, math.min(rate, value + give))
-- @include ratelimiter_ttl
return nil
