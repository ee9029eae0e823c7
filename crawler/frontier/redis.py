"""The shared Redis frontier (scrapy-redis), made durable per daemon.

Two gaps of the stock scrapy-redis scheduler are closed here:

* Enqueue marks a URL seen (``SADD``) and queues it (``ZADD``) in two round trips; a
  crash between them loses the URL for every daemon. Here one Lua script does both.
* Dequeue forgets the request: if the daemon then dies, it is gone. Here every request
  handed to this daemon is logged first (``state/frontier.jsonl`` of its output
  directory); on restart, taken-but-unfinished requests (records lost with the open
  WARC file, or still in flight) are pushed back onto the shared queue.

What remains: a crash between the atomic pop and the log line (one local write) can
lose that one request.
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


class DurableRedisScheduler(Scheduler):
    def open(self, spider: Any) -> Any:
        result = super().open(spider)
        self._seen_and_queue = self.server.register_script(_SEEN_AND_QUEUE)
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
        request = self.queue.pop(self.idle_before_close)
        if request is None:
            return None
        state = getattr(self.spider, "state", None)
        if state is not None:
            state.take(request.meta.get("afm_url", request.url), int(request.meta.get("depth", 0)))
        if self.stats:
            self.stats.inc_value("scheduler/dequeued/redis")
        return request
