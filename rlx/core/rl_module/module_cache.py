"""ModuleCache: at most `policy_map_capacity` modules of a MultiRLModule in memory (RLlib's PolicyMap).

RLlib's PolicyMap keeps the `capacity` most recently used policies in memory and stashes the
others' state (to the Ray object store, which spills to disk), bringing a policy back when an
agent maps to it. rlx does the same per MultiRLModule (one on each EnvRunner, the Learner's
when it trains a copy): a policy that has to leave memory has every tensor it owns written to
a file in a temporary directory and its storage freed: the module's parameters, buffers and
gradients, and, on the Learner, what the policy's Learner holds (optimizer state, target
networks). The Python objects stay (each tensor keeps its identity, shape and dtype, and its
data becomes an empty placeholder), so everything that refers to them, the EnvRunner's
module slot, the Learner, its optimizers, `Policy` views, keeps working. When the policy is used
again (a forward pass of any of its networks, `state_dict`/`get_state`/`set_state`, indexing
the MultiRLModule, a Learner update), its tensors are read back, after the least recently used
policy made room, so results are those of keeping every policy in memory.

With `policy_states_are_swappable=True` (RLlib: all policies have the same networks and
optimizers), a policy coming back takes over the memory of the one leaving instead of
allocating its own: no allocation per swap. It is checked that the modules have the same
tensors when they are added.

Swapping happens only once there are more policies than the capacity; until then nothing is
hooked and nothing is written.
"""
from __future__ import annotations

import collections
import contextlib
import copy
import itertools
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import torch

from rlx.core.numpy_forward import release_numpy_forward
from rlx.utils.errors import ConfigError

__all__ = ["ModuleCache"]


class _UseHook:
    """A hook on a policy's networks that brings the policy into memory before it is used.

    Copies of a network (target networks are deep copies) keep the hook: they belong to the same
    policy. A pickled network gets an inert hook (the cache belongs to this process). It changes
    no result, so rlx's NumPy forward passes ignore it (numpy_forward.RESIDENCY_HOOK); who runs
    one makes the module resident first (`ModuleCache.use`)."""

    __slots__ = ("cache", "module_id")
    rlx_residency_hook = True

    def __init__(self, cache: "ModuleCache", module_id: str):
        self.cache, self.module_id = cache, module_id

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.cache.use(self.module_id)

    def __deepcopy__(self, memo: dict) -> "_UseHook":
        return self

    def __reduce__(self) -> Any:
        return (_inert_hook, ())


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _inert_hook() -> Any:
    return _noop


def _placeholder(tensor: torch.Tensor) -> torch.Tensor:
    """Empty data of `tensor`'s dtype and device: any use of a swapped-out tensor fails loudly
    (its shape no longer fits) instead of reading freed memory."""
    return torch.empty(0, dtype=tensor.dtype, device=tensor.device)


def _own_storage(tensor: torch.Tensor) -> bool:
    """Whether `tensor` alone covers its whole storage (not a view), so its data can be swapped."""
    return (tensor._base is None and tensor.numel() > 0 and tensor.is_contiguous() and tensor.storage_offset() == 0
            and tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size())


def _module_tensors(module: torch.nn.Module, skip: Callable[[torch.Tensor], bool]) -> Iterator[torch.Tensor]:
    """The parameters (with their gradients) and buffers of `module`, but those `skip` names."""
    for param in module.parameters():
        if not skip(param):
            yield param
            if param.grad is not None:
                yield param.grad
    yield from (buffer for buffer in module.buffers() if not skip(buffer))


def _nested_tensors(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """Tensors inside an optimizer's state (torch.optim's {param: {name: tensor}}, rlx's
    {name: [tensor, ...]}) and other containers, a few levels deep."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from _nested_tensors(item, depth + 1)
    elif depth < 3 and isinstance(value, (list, tuple)):
        for item in value:
            yield from _nested_tensors(item, depth + 1)


def _owner_tensors(owner: Any, skip: Callable[[torch.Tensor], bool]) -> Iterator[torch.Tensor]:
    """The tensors a policy's Learner holds: its networks (the module, target networks), tensor
    attributes, and its optimizers' state; without those `skip` names."""
    for value in vars(owner).values():
        if isinstance(value, torch.nn.Module):
            yield from _module_tensors(value, skip)
        elif isinstance(value, torch.Tensor) and not skip(value):
            yield value
    for optimizer in (getattr(owner, "optimizers", None) or {}).values():
        for name, value in vars(optimizer).items():
            if name != "param_groups":
                yield from _nested_tensors(value)


def _layout(module: torch.nn.Module) -> list[tuple[str, tuple[int, ...], torch.dtype]]:
    """(name, shape, dtype) of every parameter and buffer of `module` (read without hooks)."""
    return [(k, tuple(v.shape), v.dtype)
            for k, v in itertools.chain(module.named_parameters(), module.named_buffers())]


def _hook_targets(module: torch.nn.Module) -> list[torch.nn.Module]:
    """The submodules whose forward passes read the policy's tensors: those that hold any."""
    return [m for m in module.modules() if m._parameters or m._buffers] or [module]


class ModuleCache:
    """Keeps at most `capacity` of the modules added to it in memory, least recently used out first.

    Args:
        capacity: how many policies' tensors stay in memory (RLlib's policy_map_capacity).
        swappable: RLlib's policy_states_are_swappable: every policy has the same tensors, so one
            coming back reuses the memory of the one leaving.
    """

    def __init__(self, capacity: int, swappable: bool = False):
        self.capacity = int(capacity)
        self.swappable = bool(swappable)
        if self.capacity < 1:
            raise ConfigError(f"policy_map_capacity must be >= 1, got {capacity!r}.")
        self._modules: dict[str, torch.nn.Module] = {}
        self._owners: dict[str, list[Any]] = {}
        self._resident: collections.OrderedDict[str, None] = collections.OrderedDict()
        # module id -> the swapped-out tensors, in file order, and the file holding their data.
        self._stashed: dict[str, tuple[list[torch.Tensor | None], Path]] = {}
        self._layouts: dict[str, list[tuple[str, tuple[int, ...], torch.dtype]]] = {}
        self._hooks: dict[str, list[Any]] = {}
        self._hooked = False
        # id of each module's parameters and buffers -> the module id holding it (None: several).
        self._tensor_module: dict[int, str | None] = {}
        self._pins: collections.Counter[str] = collections.Counter()  # modules in use: never swapped out
        self._lock = threading.RLock()
        self._last: str | None = None
        self._directory: Path | None = None
        self._finalizer: Any = None
        self._file_numbers = itertools.count()
        #: Counters: swaps out and in (those into the memory of the policy leaving: num_reused), and the
        #: most modules ever in memory at once.
        self.num_swapped_out = 0
        self.num_swapped_in = 0
        self.num_reused = 0
        self.max_resident = 0

    # ------------------------------------------------------------------ registry

    def add(self, module_id: str, module: torch.nn.Module) -> None:
        """Register `module` (in memory, most recently used); the least recently used module
        leaves memory when there are more than `capacity`."""
        with self._lock:
            if module_id in self._modules:
                self.remove(module_id)
            layout = _layout(module)
            if self.swappable:
                self._check_swappable(module_id, layout)
            self._layouts[module_id] = layout
            self._modules[module_id] = module
            self._owners.setdefault(module_id, [])
            self._update_shared()
            self._resident[module_id] = None
            self._last = module_id
            if self._hooked:
                self._install_hooks(module_id)
            self._make_room(keep=module_id)
            self.max_resident = max(self.max_resident, len(self._resident))

    def remove(self, module_id: str) -> None:
        """Forget `module_id` (its stashed file too)."""
        with self._lock:
            for handle in self._hooks.pop(module_id, []):
                handle.remove()
            stash = self._stashed.pop(module_id, None)
            if stash is not None:
                stash[1].unlink(missing_ok=True)
            self._modules.pop(module_id, None)
            self._layouts.pop(module_id, None)
            self._owners.pop(module_id, None)
            self._resident.pop(module_id, None)
            if self._last == module_id:
                self._last = None
            self._update_shared()

    def attach(self, module_id: str, owner: Any) -> None:
        """Swap `owner`'s tensors (a Learner's optimizer state and target networks) together with
        module `module_id`'s."""
        with self._lock:
            if module_id not in self._modules:
                raise KeyError(f"attach(): module {module_id!r} is not in this cache.")
            if not any(o is owner for o in self._owners[module_id]):
                self._owners[module_id].append(owner)
            if self._hooked:
                self._install_hooks(module_id)

    def detach(self, module_id: str, owner: Any) -> None:
        """Stop swapping `owner`'s tensors with module `module_id` (it keeps them in memory)."""
        with self._lock:
            self.use(module_id)
            self._owners[module_id] = [o for o in self._owners.get(module_id, []) if o is not owner]

    def set_capacity(self, capacity: int, swappable: bool | None = None) -> None:
        """Change the capacity (and swappability); modules leave memory at once if needed."""
        with self._lock:
            if int(capacity) < 1:
                raise ConfigError(f"policy_map_capacity must be >= 1, got {capacity!r}.")
            if swappable:
                for module_id, layout in self._layouts.items():
                    self._check_swappable(module_id, layout)
            self.capacity = int(capacity)
            self.swappable = self.swappable if swappable is None else bool(swappable)
            self._make_room(keep=self._last)

    # ------------------------------------------------------------------ use

    def use(self, module_id: str) -> None:
        """Bring `module_id` into memory (if it was swapped out) as the most recently used."""
        if module_id == self._last:
            return
        with self._lock:
            if module_id not in self._modules:
                return
            if module_id in self._resident:
                self._resident.move_to_end(module_id)
            else:
                freed = None
                while len(self._resident) >= self.capacity:
                    victim = self._victim(keep=None)
                    if victim is None:
                        break  # every module in memory is pinned: over capacity until they are released
                    freed = self._swap_out(victim)
                self._swap_in(module_id, freed if self.swappable else None)
                self._resident[module_id] = None
                self.max_resident = max(self.max_resident, len(self._resident))
            self._last = module_id

    @contextlib.contextmanager
    def pinned(self, module_id: str) -> Iterator[None]:
        """Keep `module_id` in memory inside this block, whatever other threads use (a Learner
        update in a learner thread while the driver reads weights); the cache may hold more than
        `capacity` modules meanwhile."""
        with self._lock:
            self.use(module_id)
            self._pins[module_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._pins[module_id] -= 1
                if self._pins[module_id] <= 0:
                    del self._pins[module_id]
                    self._make_room(keep=self._last)  # back to capacity if pins held more in memory

    def is_resident(self, module_id: str) -> bool:
        """Whether `module_id`'s tensors are in memory."""
        return module_id in self._resident

    def resident_ids(self) -> list[str]:
        """The ids in memory, least recently used first."""
        return list(self._resident)

    # ------------------------------------------------------------------ swapping

    def _make_room(self, keep: str | None) -> None:
        if len(self._resident) <= self.capacity:
            return
        if not self._hooked:
            self._hooked = True
            for module_id in self._modules:
                self._install_hooks(module_id)
        while len(self._resident) > self.capacity:
            victim = self._victim(keep)
            if victim is None:
                return
            self._swap_out(victim)

    def _victim(self, keep: str | None) -> str | None:
        """The least recently used module in memory that may leave (not `keep`, not pinned)."""
        return next((mid for mid in self._resident if mid != keep and mid not in self._pins), None)

    def _tensors(self, module_id: str) -> list[torch.Tensor]:
        """The swappable tensors of `module_id`: its module's and its owners', once each."""
        seen: set[int] = set()
        storages: collections.Counter[int] = collections.Counter()
        found = []
        def not_own(tensor: torch.Tensor) -> bool:
            # Another policy's (or several policies') tensor, e.g. a shared encoder: it stays in memory.
            return self._tensor_module.get(id(tensor), module_id) != module_id

        sources: Iterable[torch.Tensor] = itertools.chain(
            _module_tensors(self._modules[module_id], not_own),
            *(_owner_tensors(owner, not_own) for owner in self._owners.get(module_id, [])))
        for tensor in sources:
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            if not _own_storage(tensor):
                continue
            storages[tensor.untyped_storage().data_ptr()] += 1
            found.append(tensor)
        # Two tensor objects on one storage would come back as two: leave such pairs in memory.
        return [t for t in found if storages[t.untyped_storage().data_ptr()] == 1]

    def _swap_out(self, module_id: str) -> list[torch.Tensor]:
        """Write `module_id`'s tensors to its file and free them; return their data (for reuse)."""
        from safetensors.torch import save_file

        tensors = self._tensors(module_id)
        release_numpy_forward(self._modules[module_id])  # its NumPy views would keep the storage alive
        path = self._stash_directory() / f"{next(self._file_numbers)}.safetensors"
        save_file({str(i): t.detach().to("cpu", copy=False).contiguous() for i, t in enumerate(tensors)}, str(path))
        freed = []
        for tensor in tensors:
            freed.append(tensor.data)
            tensor.data = _placeholder(tensor)
        self._stashed[module_id] = (list(tensors), path)
        self._resident.pop(module_id)
        if self._last == module_id:
            self._last = None
        self.num_swapped_out += 1
        return freed

    def _swap_in(self, module_id: str, reuse: list[torch.Tensor] | None) -> None:
        """Read `module_id`'s tensors back (into `reuse`, the data of the policy that just left,
        when every tensor fits)."""
        from safetensors import safe_open

        tensors, path = self._stashed.pop(module_id)
        with safe_open(str(path), framework="pt", device="cpu") as stash:
            if reuse is not None and [(r.shape, r.dtype, r.device) for r in reuse] != [
                    (torch.Size(stash.get_slice(str(i)).get_shape()), t.dtype, t.device) if t is not None else None
                    for i, t in enumerate(tensors)]:
                reuse = None  # e.g. one optimizer has state and the other not yet: allocate
            for i, tensor in enumerate(tensors):
                if tensor is None:  # a tensor of the original's Learner, in a copied cache
                    continue
                saved = stash.get_tensor(str(i))
                data = reuse[i] if reuse is not None else torch.empty(saved.shape, dtype=saved.dtype,
                                                                      device=tensor.device)
                data.copy_(saved)
                tensor.data = data
        path.unlink(missing_ok=True)
        self.num_swapped_in += 1
        self.num_reused += reuse is not None

    def _stash_directory(self) -> Path:
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="rlx-policy-map-"))
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self._directory), True)
        return self._directory

    # ------------------------------------------------------------------ hooks and checks

    def _install_hooks(self, module_id: str) -> None:
        """Hook every network of `module_id` (and of its owners) so that using one brings the
        policy into memory: forward passes, state_dict() and load_state_dict()."""
        handles = self._hooks.setdefault(module_id, [])
        hooked = {id(h.module) for h in handles if hasattr(h, "module")}
        networks = [self._modules[module_id]] + [getattr(v, "unwrapped_module", v)
                                                 for owner in self._owners.get(module_id, [])
                                                 for v in vars(owner).values() if isinstance(v, torch.nn.Module)]
        networks = list({id(n): n for n in networks}.values())
        hook = _UseHook(self, module_id)
        for network in networks:
            if id(network) in hooked:
                continue
            group = [network.register_state_dict_pre_hook(hook), network.register_load_state_dict_pre_hook(hook)]
            group += [m.register_forward_pre_hook(hook) for m in _hook_targets(network)]
            handles.append(_HookGroup(network, group))

    def _update_shared(self) -> None:
        owners: dict[int, str | None] = {}
        for module_id, module in self._modules.items():
            for tensor in itertools.chain(module.parameters(), module.buffers()):
                owners[id(tensor)] = module_id if owners.get(id(tensor), module_id) == module_id else None
        self._tensor_module = owners

    def _check_swappable(self, module_id: str, layout: list[tuple[str, tuple[int, ...], torch.dtype]]) -> None:
        """ConfigError unless a module with `layout` can take over the memory of the others."""
        first = next(iter(self._layouts), None)
        if first is None or first == module_id or self._layouts[first] == layout:
            return
        raise ConfigError(
            f"policy_states_are_swappable=True, but the module of policy {module_id!r} does not have the same "
            f"tensors as that of {first!r}: swapping one policy's state into the other's memory needs the same "
            "networks. Set policy_states_are_swappable=False (each policy then gets its own memory).")

    def __deepcopy__(self, memo: dict) -> "ModuleCache":
        """A cache of the copied modules (the copy of a MultiRLModule), with its own stash files."""
        new = ModuleCache(self.capacity, self.swappable)
        memo[id(self)] = new
        with self._lock:
            new._modules = {mid: copy.deepcopy(m, memo) for mid, m in self._modules.items()}
            new._owners = {mid: [] for mid in self._modules}  # Learners are not copied with their modules
            new._resident = collections.OrderedDict(self._resident)
            new._update_shared()
            for mid, module in new._modules.items():
                _remove_hooks_of(module, self)
            new._layouts = dict(self._layouts)
            for mid, (tensors, path) in self._stashed.items():
                copies = [memo.get(id(t)) if t is not None else None for t in tensors]
                target = new._stash_directory() / f"{next(new._file_numbers)}.safetensors"
                shutil.copyfile(path, target)
                new._stashed[mid] = (copies, target)
            new._hooked = self._hooked
            if new._hooked:
                for mid in new._modules:
                    new._install_hooks(mid)
            new._last = self._last
            new.max_resident = len(new._resident)
        return new

    def __getstate__(self) -> Any:
        raise TypeError("A MultiRLModule that swaps policies out (policy_map_capacity) cannot be pickled; "
                        "send its weights (get_state()) instead.")

    def __repr__(self) -> str:
        return (f"ModuleCache(capacity={self.capacity}, in memory={list(self._resident)}, "
                f"swapped out={sorted(self._stashed)})")


class _HookGroup:
    """The hook handles installed on one network."""

    def __init__(self, module: torch.nn.Module, handles: list[Any]):
        self.module, self.handles = module, handles

    def remove(self) -> None:
        """Remove every hook of the group."""
        for handle in self.handles:
            handle.remove()


def _remove_hooks_of(module: torch.nn.Module, cache: ModuleCache) -> None:
    """Drop the hooks of `cache` that a deep copy of `module` carried over."""
    for m in module.modules():
        for hooks in (m._forward_pre_hooks, m._state_dict_pre_hooks, m._load_state_dict_pre_hooks):
            for key in [k for k, h in hooks.items() if _hook_cache(h) is cache]:
                del hooks[key]


def _hook_cache(hook: Any) -> Any:
    hook = getattr(hook, "hook", hook)  # load_state_dict pre hooks are wrapped
    return hook.cache if isinstance(hook, _UseHook) else None
