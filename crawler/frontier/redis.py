"""The shared Redis frontier (scrapy-redis), made durable per daemon.

Two gaps of the stock scrapy-redis scheduler are closed here:

* Enqueue marks a URL seen (``SADD``) and queues it (``ZADD``) in two round trips; a
  crash between them loses the URL for every daemon. Here one Lua script does both.
* Dequeue forgets the request: if the daemon then dies, it is gone. Here every request
  handed to this daemon is logged first (``state/frontier.jsonl`` of its output
  directory); on restart, taken-but-unfinished requests (records lost with the open
  WARC file, or still in flight) are pushed back onto the shared queue.
* Between the pop and that log line (a network round trip and one local write) a
  ``kill -9`` would lose the request. So the pop is one Lua script that also *holds* what
  it popped, under this output directory's name (``<queue>:held:<owner>``), with a pop
  number that the log line repeats; the next pop replaces it, the log line having been
  written by then. On restart, a held request whose number is not in the log is the one
  the crash cut off, and it is handed out first.

What remains: a daemon that never comes back (its output directory gone) leaves its
taken requests, as it leaves its unfinished WARC file; Redis itself must keep its data.
"""

from __future__ import annotations

from typing import Any

from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import PriorityQueue
from scrapy_redis.scheduler import Scheduler

_SEEN_AND_QUEUE = """
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
  return 1
end
return 0
"""

# KEYS: the queue (sorted set), this daemon's held pop (hash). Returns {request, pop number}.
_POP_AND_HOLD = """
local item = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #item == 0 then return false end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, 0)
local pop = redis.call('HINCRBY', KEYS[2], 'pop', 1)
redis.call('HSET', KEYS[2], 'data', item[1], 'score', item[2], 'at', pop)
return {item[1], pop}
"""


class DurableRedisScheduler(Scheduler):
    def open(self, spider: Any) -> Any:
        result = super().open(spider)
        self._seen_and_queue = self.server.register_script(_SEEN_AND_QUEUE)
        self._pop_and_hold = self.server.register_script(_POP_AND_HOLD)
        self._held_key = ""  # known once the spider's state is open (first pop)
        return result

    def enqueue_request(self, request: Any) -> bool:
        if request.dont_filter or not (
            isinstance(self.queue, PriorityQueue) and isinstance(self.df, RFPDupeFilter)
        ):
            return super().enqueue_request(request)
        fingerprint = self.df.request_fingerprint(request)
        data = self.queue._encode_request(request)
        added = self._seen_and_queue(keys=[self.df.key, self.queue.key], args=[fingerprint, -request.priority, data])
        if not added:
            self.df.log(request, self.spider)
            # Another daemon (or this one) had it: it does not count against this
            # daemon's page budget (max_pages, per_host_budget), only as a duplicate.
            refund = getattr(self.spider, "refund_duplicate", None)
            if refund is not None:
                refund(request.meta.get("afm_url", request.url))
            return False
        if self.stats:
            self.stats.inc_value("scheduler/enqueued/redis")
        return True

    def next_request(self) -> Any:
        state = getattr(self.spider, "state", None)
        if state is None or not isinstance(self.queue, PriorityQueue):
            request, pop = self.queue.pop(self.idle_before_close), 0
        else:
            request, pop = self._durable_pop(state)
        if request is None:
            return None
        if state is not None:
            state.take(request.meta.get("afm_url", request.url), int(request.meta.get("depth", 0)), pop)
        if self.stats:
            self.stats.inc_value("scheduler/dequeued/redis")
        return request

    def _durable_pop(self, state: Any) -> tuple[Any, int]:
        """The next request and its pop number; after a restart, first the request the
        crash cut off between its pop and its log line, if there is one."""
        if not self._held_key:
            self._held_key = f"{self.queue.key}:held:{state.owner_id()}"
            held = self.server.hgetall(self._held_key)
            pop = int(held.get(b"at", 0))
            if pop > state.last_take and b"data" in held:
                if self.stats:
                    self.stats.inc_value("afm/recovered_held_pop")
                return self.queue._decode_request(held[b"data"]), pop
        popped = self._pop_and_hold(keys=[self.queue.key, self._held_key])
        if not popped:
            return None, 0
        return self.queue._decode_request(popped[0]), int(popped[1])
