"""A broker's session with its controller (Kafka's BrokerLifecycleManager,
KIP-631): register for a broker epoch, then heartbeat to keep it.

Each heartbeat reports how far the broker has read the metadata log; the
answer says whether the controller fences it. A broker starts fenced and
serves clients only once unfenced, which the controller grants when it has
caught up. A stale broker epoch means the controller no longer knows this
session: the broker registers again.
"""

from __future__ import annotations

import asyncio
import logging

from kio.schema.errors import ErrorCode

from reference_broker.config import BrokerConfig
from reference_broker.controller.image import MetadataImage
from reference_broker.controller_link import ControllerLink
from reference_broker.peer import PeerError

log = logging.getLogger("reference_broker")


class BrokerLifecycle:
    def __init__(self, config: BrokerConfig, link: ControllerLink, image: MetadataImage):
        """`image` is the broker's own: its offset is what a heartbeat reports."""
        self.node_id = config.node_id
        self.broker_epoch = -1
        self.fenced = True
        self._config = config
        self._link = link
        self._image = image
        self._unfenced = asyncio.Event()

    async def register(self) -> None:
        host, port = self._config.advertise
        while True:
            try:
                self.broker_epoch = await self._link.register(self.node_id, host, port)
                log.info("node %d registered, broker epoch %d", self.node_id, self.broker_epoch)
                return
            except PeerError as e:
                log.warning("node %d: cannot register with the controller: %s", self.node_id, e)
                await asyncio.sleep(0.5)

    async def heartbeats(self) -> None:
        interval = self._config["broker.heartbeat.interval.ms"] / 1000
        while True:
            # A fenced broker asks again soon: it is unfenced once caught up.
            await asyncio.sleep(min(interval, 0.05) if self.fenced else interval)
            try:
                error, fenced = await self._link.heartbeat(
                    self.node_id, self.broker_epoch, want_fence=False,
                    metadata_offset=self._image.offset)
            except PeerError as e:
                log.warning("node %d: heartbeat failed: %s", self.node_id, e)
                continue
            if error == ErrorCode.stale_broker_epoch:
                log.warning("node %d: broker epoch %d is stale; registering again",
                            self.node_id, self.broker_epoch)
                await self.register()
                continue
            if fenced != self.fenced:
                log.info("node %d %s", self.node_id, "fenced" if fenced else "unfenced")
            self.fenced = fenced
            if not fenced:
                self._unfenced.set()

    async def wait_unfenced(self) -> None:
        """Return once the controller has first unfenced this broker."""
        while not self._unfenced.is_set():
            try:
                await asyncio.wait_for(self._unfenced.wait(), 10)
            except asyncio.TimeoutError:
                log.warning("node %d: still fenced by the controller after 10 s", self.node_id)
