import asyncio, time, tempfile, os, sys
from kubemu import wire
N = 40000
ITEM = wire.SharedItem(type="MODIFIED", object=wire.SharedItem({"metadata": {"name": "p", "namespace": "default", "resourceVersion": "123", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "pause"}], "nodeName": "n1"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}))
async def gen(batch: int):
    if batch <= 1:
        for _ in range(N):
            yield ITEM
    else:
        for _ in range(N // batch):
            yield wire.Batch([ITEM] * batch)
async def main():
    d = tempfile.mkdtemp(); ep = wire.ipc_endpoint(d, "s")
    async with wire.Server(ep, {"gen": gen}) as server, wire.Client(ep) as client:
        for batch in (1, 8, 1, 8, 1, 8):
            t0 = time.process_time()
            n = 0
            async for _ in client.stream("gen", {"batch": batch}):
                n += 1
            dt = time.process_time() - t0
            print(f"batch {batch}: {n} items, {dt/n*1e6:.2f} us CPU per item (both ends)")
asyncio.run(main())
