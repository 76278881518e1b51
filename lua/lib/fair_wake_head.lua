-- fair_wake_head (included by fair_unlock, fair_force_unlock): publishes the message on
-- the channel of the waiter at the head of the queue, if there is one (only the head is
-- woken).
-- Expects  KEYS[2]        queue redisson_lock_queue:{N}
--          KEYS[4]        channel base redisson_lock__channel:{N}
--          local publish  PUBLISH or SPUBLISH
--          local message  the message ("0")
-- Leaves   nothing defined.
do
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        redis.call(publish, KEYS[4] .. ':' .. head, message)
    end
end
