"""The server's pool of block buffers: bounded, reused, and never shared by two uploads at once."""

from __future__ import annotations

import asyncio
import ctypes

from lakectl.core.blocks import directio
from server.blocks import MAX_BLOCK, BlockBuffers


def test_leases_are_bounded_and_reused() -> None:
    async def scenario() -> None:
        pool = BlockBuffers(2)
        size = BlockBuffers.POOLED_MIN + 1
        order: list[str] = []
        seen: list[int] = []

        async def upload(name: str, hold: asyncio.Event) -> None:
            async with pool.lease(size) as view:
                assert len(view) == size and len(view.obj) == MAX_BLOCK  # type: ignore[arg-type]
                seen.append(id(view.obj))
                order.append(f"{name} in")
                await hold.wait()
                order.append(f"{name} out")

        holds = [asyncio.Event() for _ in range(3)]
        tasks = [asyncio.create_task(upload(f"u{i}", holds[i])) for i in range(3)]
        await asyncio.sleep(0.01)
        assert order == ["u0 in", "u1 in"], "a third upload must wait for a buffer"
        holds[0].set()
        await asyncio.sleep(0.01)
        assert order[2:] == ["u0 out", "u2 in"]
        assert seen[2] == seen[0], "the freed buffer is the one reused"
        for hold in holds:
            hold.set()
        await asyncio.gather(*tasks)

    asyncio.run(scenario())


def test_small_bodies_take_no_pooled_buffer() -> None:
    async def scenario() -> None:
        pool = BlockBuffers(1)
        # The second lease does not wait for the only pooled buffer, which the first one holds.
        async with pool.lease(BlockBuffers.POOLED_MIN + 1), pool.lease(1000) as small:
            assert len(small) == 1000 and len(small.obj) == 1000  # type: ignore[arg-type]

    asyncio.run(asyncio.wait_for(scenario(), 5))


def test_pooled_buffers_are_page_aligned_for_writes_around_the_page_cache() -> None:
    """A block received into a pooled buffer is written by a local store directly from it
    (``O_DIRECT`` wants aligned memory), not copied into an aligned buffer first."""

    async def scenario() -> None:
        pool = BlockBuffers(2)
        async with pool.lease(MAX_BLOCK) as whole, pool.lease(BlockBuffers.POOLED_MIN + 4096) as part:
            for view in (whole, part):
                address = ctypes.addressof(ctypes.c_char.from_buffer(view))
                assert address % directio.ALIGN == 0

    asyncio.run(scenario())
