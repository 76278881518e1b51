-- ratelimiter_records (included by the ratelimiter_* scripts that read permit records):
-- helpers over the zset of permit records. A record is struct.pack('Bc0I', 16, random,
-- permits) (the length of the random bytes, the 16 random bytes of the acquire, the
-- permits as a native unsigned 32-bit integer), scored with the acquirer's clock.
-- Expects  local permits_key  the mode's permit zset
--          local interval     the rate interval in ms (a number)
-- Leaves   local function record_permits(member)  the permits of one record
--          local function reclaim(now)  removes the records that expired by now (score <=
--                                       now - interval) and returns their permits
--          local function used()        the permits of the records left
local function record_permits(member)
    local _, permits = struct.unpack('Bc0I', member)
    return permits
end
local function reclaim(now)
    local expired = redis.call('zrangebyscore', permits_key, 0, now - interval)
    local released = 0
    for _, member in ipairs(expired) do
        released = released + record_permits(member)
    end
    if released > 0 then
        redis.call('zremrangebyscore', permits_key, 0, now - interval)
    end
    return released
end
local function used()
    local total = 0
    for _, member in ipairs(redis.call('zrange', permits_key, 0, -1)) do
        total = total + record_permits(member)
    end
    return total
end
