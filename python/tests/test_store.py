"""test_store.py - torch's TCPStore client against the store smddp-run serves.

Run under smddp-run --store launcher: every query of torch's TCPStore
(set, get, add, wait and its timeout, check, compare_set, append, multi_get,
multi_set, delete_key, num_keys, the queues) against what a store must
answer, from several ranks at once.
"""
import datetime
import os

import torch.distributed as dist

from common import check, expect_error, finish


def main():
    r, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    check(os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
          "TORCHELASTIC_USE_AGENT_STORE is not True")
    check(os.environ["MASTER_PORT"] != os.environ["SMDDP_MASTER_PORT"],
          "libsmddp's rendezvous port is the store's")
    s = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), n,
                      is_master=False, timeout=datetime.timedelta(seconds=30))
    keys = [f"k{i}" for i in range(n)]
    s.set(f"k{r}", f"v{r}")
    s.wait(keys)
    check(s.get(f"k{(r + 1) % n}") == f"v{(r + 1) % n}".encode(), "get of another rank's key")
    check(s.check(keys), "check of present keys")
    check(not s.check(["absent"]), "check of an absent key")
    check(s.add("counter", 2) % 2 == 0, "add")
    # a binary value, with zero bytes, and a long one
    big = bytes(range(256)) * 4096
    s.set(f"bin{r}", big)
    check(s.get(f"bin{r}") == big, "a 1 MiB binary value")
    # a barrier of the ranks through the store: every add seen by all
    s.add("arrived", 1)
    if r:
        s.wait(["go"])
    else:
        while int(s.get("arrived")) < n:
            pass
        s.set("go", "1")
        check(s.get("counter") == str(2 * n).encode(), f"counter {s.get('counter')}")
        check(s.compare_set("cas", "", "a") == b"a", "compare_set of a new key")
        check(s.compare_set("cas", "x", "b") == b"a", "compare_set, wrong expectation")
        check(s.compare_set("cas", "a", "b") == b"b", "compare_set, right expectation")
        s.append("ap", "x")
        s.append("ap", "y")
        check(s.get("ap") == b"xy", "append")
        s.multi_set(["m1", "m2"], ["1", "2"])
        check(s.multi_get(["m1", "m2"]) == [b"1", b"2"], "multi_get")
        before = s.num_keys()
        check(s.delete_key("m1") and not s.delete_key("m1"), "delete_key")
        check(s.num_keys() == before - 1, "num_keys after a delete")
        expect_error(lambda: s.wait(["never"], datetime.timedelta(seconds=1)),
                     ["time"], "a wait that times out")
        check(s.get("ap") == b"xy", "the connection works after a cancelled wait")
        if hasattr(s, "queue_push"):
            s.queue_push("q", "a")
            s.queue_push("q", "b")
            check(s.queue_len("q") == 2, "queue_len")
            check(s.queue_pop("q") == b"a" and s.queue_pop("q") == b"b", "queue_pop order")
    finish(f"store of {n} ranks")


if __name__ == "__main__":
    main()
