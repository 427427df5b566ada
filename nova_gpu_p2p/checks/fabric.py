# Copyright 2026 The nova-gpu-p2p Authors
#
# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""HGX boards: NVIDIA Fabric Manager, its mode, partitions and modules.

Judged where ``topology_backend = fabricmanager`` or NVSwitches are on the
host. Fabric Manager's mode decides the rest: in shared NVSwitch mode
(``FABRIC_MODE=1``) it runs on this host, each server gets the partition
of its GPUs, the GPUs idle on ``nvidia`` between tenants and the switches
stay on ``nvidia``; in full passthrough mode (0) a server gets the whole
board, switches included, and runs Fabric Manager itself.
"""

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses
import enum
import typing

from nova_gpu_p2p_guest import input_file

from nova_gpu_p2p import ascii_decimal
from nova_gpu_p2p.checks import nvswitch
from nova_gpu_p2p.checks import placement
from nova_gpu_p2p.checks import result
from nova_gpu_p2p import device_spec_tags
from nova_gpu_p2p import exception
from nova_gpu_p2p.fabric import nvfm
from nova_gpu_p2p.topology import backends
from nova_gpu_p2p.topology import model

SERVICE = 'nvidia-fabricmanager'
#: Where NVIDIA's packages install Fabric Manager's configuration.
CONFIG_FILE = '/usr/share/nvidia/nvswitch/fabricmanager.cfg'
MODE_KEY = 'FABRIC_MODE'
#: CUDA's answer in a guest whose GPU is in no active partition.
CUDA_NOT_READY = 'CUDA error 802, system not ready'


class FabricMode(enum.IntEnum):
    """``FABRIC_MODE`` in Fabric Manager's configuration."""

    FULL_PASSTHROUGH = 0
    SHARED_NVSWITCH = 1
    VGPU = 2

    @property
    def text(self) -> str:
        return '%s=%d (%s)' % (MODE_KEY, self.value, {
            0: 'bare metal or full passthrough', 1: 'shared NVSwitch',
            2: 'vGPU'}[self.value])


@dataclasses.dataclass(frozen=True)
class FabricConfig:
    path: str
    #: None where the file could not be read (``problem`` says why).
    mode: FabricMode | None = None
    problem: str | None = None


@dataclasses.dataclass(frozen=True)
class FabricState:
    """What Fabric Manager answered, or the error it answered with."""

    partitions: tuple[nvfm.Partition, ...] = ()
    error: exception.FmError | None = None


@dataclasses.dataclass(frozen=True)
class FabricFacts:
    """What the checks of an HGX host judge, gathered by :func:`gather`."""

    backend: str
    #: What that backend does: activate partitions, map module IDs.
    can: backends.Capabilities
    #: The backends that activate partitions, as advice names them.
    partition_backends: str
    address: str
    config: FabricConfig
    #: None where Fabric Manager was not asked (not in shared mode).
    state: FabricState | None = None

    @property
    def shared(self) -> bool:
        """Partitions per server: the mode says so, or the backend does."""
        if self.config.mode is not None:
            return self.config.mode is FabricMode.SHARED_NVSWITCH
        return self.can.partitions


def read_config(path: str) -> FabricConfig:
    """``FABRIC_MODE`` from Fabric Manager's ``KEY=VALUE`` file.

    Fabric Manager's own default, 0, where the file does not set it.
    """
    try:
        text = input_file.read_text(path, errors='replace')
    except OSError as exc:
        return FabricConfig(path, problem='cannot read %s: %s' % (
            path, exc.strerror or exc))
    value = '0'
    for line in text.splitlines():
        key, sep, found = line.partition('=')
        if sep and key.strip() == MODE_KEY:
            value = found.split('#')[0].strip()
    try:
        return FabricConfig(path, FabricMode(ascii_decimal.parse(value)))
    except ValueError:
        allowed = ', '.join(str(mode.value) for mode in FabricMode)
        return FabricConfig(path, problem='%s: %s=%s is not one of %s' % (
            path, MODE_KEY, value, allowed))


def ask(conf: typing.Any) -> FabricState:
    """Every partition Fabric Manager supports, or why it did not say."""
    try:
        with nvfm.from_conf(conf) as fm:
            return FabricState(fm.partitions())
    except exception.FmError as exc:
        return FabricState(error=exc)


def gather(conf: typing.Any, config_path: str,
           host: model.HostTopology | None) -> FabricFacts | None:
    """The facts of an HGX host; None on any other host.

    :param host: the host's PCI functions, drivers included; None where
        they could not be read.
    """
    backend = conf.gpu_p2p.topology_backend
    can = backends.capabilities(backend)
    if not can.partitions and not (host and nvswitch.switches(host)):
        return None
    facts = FabricFacts(backend, can,
                        ' or '.join(backends.offering('partitions')),
                        conf.gpu_p2p.fabric_manager_address,
                        read_config(config_path))
    if facts.shared:
        facts = dataclasses.replace(facts, state=ask(conf))
    return facts


def check_mode(facts: FabricFacts) -> result.Check:
    """The mode decides everything else: it must fit the backend."""
    subject = 'Fabric Manager mode'
    config, mode = facts.config, facts.config.mode
    whole = ('nova-gpu-p2p flavor --whole-board gives its flavor and PCI '
             'aliases')
    if mode is None:
        return result.warning(
            subject, '%s: which mode Fabric Manager runs in is unknown'
            % config.problem,
            'install %s and set %s in its configuration: 1 (shared '
            'NVSwitch) gives each server the partition of its GPUs, with '
            '[gpu_p2p] topology_backend = %s; 0 (full passthrough) gives '
            'a server the whole board; or give check --fabricmanager-config '
            'PATH (%s)' % (SERVICE, MODE_KEY, facts.partition_backends,
                           result.see(result.Doc.FM_MODE)))
    if mode is FabricMode.SHARED_NVSWITCH:
        if not facts.can.partitions:
            return result.failure(
                subject, '%s in %s, but topology_backend = %s: no '
                'partition is activated for a server, so its GPUs have no '
                'NVLink and CUDA fails in the guest (%s)' % (
                    mode.text, config.path, facts.backend, CUDA_NOT_READY),
                'set [gpu_p2p] topology_backend = %s and restart '
                'nova-compute' % facts.partition_backends)
        return result.success(
            subject, '%s in %s: nova-compute activates the partition of '
            'each server\'s GPUs before it starts'
            % (mode.text, config.path))
    if mode is FabricMode.FULL_PASSTHROUGH and not facts.can.partitions:
        return result.success(
            subject, '%s in %s: only whole-board servers get NVLink, '
            'running Fabric Manager themselves; %s' % (
                mode.text, config.path, whole))
    return result.failure(
        subject, '%s in %s: Fabric Manager here activates no partitions '
        'for guests%s' % (mode.text, config.path,
                          ', as topology_backend = %s needs' % facts.backend
                          if facts.can.partitions else ''),
        'set %s=1 there and restart %s (%s); or, for whole-board servers, '
        '%s=0 with another topology_backend: %s' % (
            MODE_KEY, SERVICE, result.see(result.Doc.FM_MODE), MODE_KEY,
            whole))


def check_reachable(facts: FabricFacts) -> result.Check:
    """Without Fabric Manager no partition, so no GPU server, starts."""
    subject = 'Fabric Manager'
    state = facts.state
    if state.error is None:
        return result.success(
            subject, 'reachable at %s: %d partitions, %d active' % (
                facts.address, len(state.partitions),
                sum(p.active for p in state.partitions)))
    if isinstance(state.error, exception.FmNotReady):
        return result.warning(
            subject, 'at %s it has no partition data yet (%s): it is '
            'starting, or restarted in restart mode and waits for '
            'nova-compute to tell it the running servers\' partitions' % (
                facts.address, state.error),
            'nova-compute does so at its next periodic update or server '
            'start; if this persists, check that nova-compute runs with '
            '[gpu_p2p] topology_backend = fabricmanager (%s)'
            % result.see(result.Doc.FM_UNREACHABLE))
    if isinstance(state.error, exception.FmLibraryMissing):
        fix = ('install NVIDIA\'s Fabric Manager packages (the library '
               'that comes with %s), or set [gpu_p2p] '
               'fabric_manager_library to its path' % SERVICE)
    else:
        fix = ('start it (systemctl enable --now %s) and set [gpu_p2p] '
               'fabric_manager_address to where it listens: '
               'FM_CMD_BIND_INTERFACE and FM_CMD_PORT_NUMBER, or '
               'FM_CMD_UNIX_SOCKET_PATH, in %s'
               % (SERVICE, facts.config.path))
    return result.failure(
        subject, 'cannot reach it at %s (%s): new servers with GPUs are '
        'refused here, existing ones start without NVLink' % (
            facts.address, state.error),
        '%s (%s)' % (fix, result.see(result.Doc.FM_UNREACHABLE)))


def module_addresses(partitions: Iterable[nvfm.Partition],
                     topology: model.HostTopology) -> dict[int, str]:
    """Module ID -> GPU address, as the topology backend mapped them.

    Read off the 1-GPU partitions: Fabric Manager's names one module, the
    backend's of the same ID its GPU.
    """
    addresses = {p.id: p.gpus for p in topology.fabric_partitions}
    return {next(iter(p.modules)): addresses[p.id][0]
            for p in partitions
            if len(p.modules) == 1 and len(addresses.get(p.id, ())) == 1}


def _modules_text(modules: Iterable[int], where: Mapping[int, str]) -> str:
    ordered = sorted(modules)
    return '%s %s -> %s' % (
        'module' if len(ordered) == 1 else 'modules',
        ', '.join(map(str, ordered)),
        ', '.join(where.get(m, 'unknown') for m in ordered))


def check_partitions(partitions: Iterable[nvfm.Partition],
                     where: Mapping[int, str]) -> list[result.Check]:
    """One line per partition: its modules, their GPUs, active or not."""
    return [result.success('FM partition %d' % p.id, '%s; %s' % (
        _modules_text(p.modules, where),
        'active' if p.active else 'inactive'))
        for p in sorted(partitions, key=lambda p: p.id)]


def check_module_ids(partitions: Iterable[nvfm.Partition],
                     where: Mapping[int, str],
                     topology: model.HostTopology) -> result.Check:
    """Fabric Manager names GPUs by module: each GPU needs its number."""
    subject = 'module IDs'
    known = set(where.values())
    gpus = sorted(g.address for g in topology.gpus() if g.is_nvidia_gpu)
    without = [g for g in gpus if g not in known]
    modules = set().union(*(p.modules for p in partitions)) - where.keys()
    if not without and not modules:
        return result.success(subject, 'every GPU\'s module ID known: %s'
                              % ', '.join('%d %s' % item
                                          for item in sorted(where.items())))
    found = []
    if without:
        found.append('no module ID for GPU %s' % ', '.join(without))
    if modules:
        found.append('no GPU for module %s' % ', '.join(
            map(str, sorted(modules))))
    return result.failure(
        subject, '%s: Fabric Manager names GPUs by module ID, so the '
        'partitions holding them are left out, and a server given them '
        'gets no partition' % '; '.join(found),
        'bind those GPUs to nvidia while no guest uses them, so that NVML '
        'tells their module IDs, and restart nova-compute; or give '
        'module_id per GPU in the static topology file (%s)'
        % result.see(result.Doc.FM_MODULE_IDS))


def check_single_gpu(partitions: Iterable[nvfm.Partition],
                     where: Mapping[int, str]) -> result.Check:
    """A 1-GPU server gets its 1-GPU partition: no peers, but CUDA works."""
    subject = '1-GPU servers'
    single = sorted(next(iter(p.modules)) for p in partitions
                    if len(p.modules) == 1)
    without = sorted(set(where) - set(single))
    if without:
        return result.warning(
            subject, 'Fabric Manager has no 1-GPU partition for module %s '
            '(GPU %s): a 1-GPU server given it gets no partition, and CUDA '
            'fails in the guest (%s)' % (
                ', '.join(map(str, without)),
                ', '.join(where[m] for m in without), CUDA_NOT_READY),
            'give such GPUs to servers of two or more GPUs only')
    return result.success(
        subject, 'each GPU has its 1-GPU partition: a 1-GPU server has no '
        'NVLink peers, but nova-compute activates that partition before '
        'the guest starts, without which CUDA fails in the guest (%s)'
        % CUDA_NOT_READY)


def check_managed(bindings: model.HostTopology,
                  pci: placement.PciSettings | None) -> list[result.Check]:
    """GPUs idle on nvidia: libvirt must move them (managed hostdevs)."""
    if pci is None:
        return []
    gpus = [g for g in bindings.gpus() if g.is_nvidia_gpu]
    tags = device_spec_tags.configured_tags(
        pci.device_specs, [(g.address, g.vendor, g.device) for g in gpus])
    unmanaged = sorted(a for a, t in tags.items()
                       if t.get('managed') == 'false')
    if not unmanaged:
        return []
    return [result.failure(
        '[pci] device_spec',
        'managed=no for GPU %s: libvirt leaves it on the driver it is on, '
        'but on this host it idles on nvidia between servers (Fabric '
        'Manager needs it there) and must be moved to vfio-pci at each '
        'guest start' % ', '.join(unmanaged),
        'remove "managed" from those entries (Nova\'s default is yes) and '
        'restart nova-compute')]


def switch_driver(facts: FabricFacts) -> str | None:
    """The NVSwitches' driver: Fabric Manager's here, or the guest's."""
    if facts.shared:
        return 'nvidia'
    if facts.config.mode is FabricMode.FULL_PASSTHROUGH:
        return 'vfio-pci'
    return None


def check_unread(facts: FabricFacts) -> list[result.Check]:
    """What can be judged when the topology could not be read."""
    checks = [check_mode(facts)]
    if facts.state is not None:
        checks.append(check_reachable(facts))
    return checks


def check_fabric(facts: FabricFacts, topology: model.HostTopology,
                 bindings: model.HostTopology,
                 pci: placement.PciSettings | None) -> list[result.Check]:
    """Every check of an HGX host, in the order an operator fixes things."""
    checks = check_unread(facts)
    driver = switch_driver(facts)
    checks.extend(nvswitch.check_bindings(bindings, driver))
    if facts.config.mode is None and not facts.can.partitions:
        checks.extend(nvswitch.check_nvswitch(topology))
    if facts.shared:
        checks.extend(check_managed(bindings, pci))
    state = facts.state
    if state is None or state.error is not None:
        return checks
    where = module_addresses(state.partitions, topology)
    if facts.can.module_ids:
        # Other backends map no modules: check_mode says which to set.
        checks.append(check_module_ids(state.partitions, where, topology))
        checks.append(check_single_gpu(state.partitions, where))
    checks.extend(check_partitions(state.partitions, where))
    return checks
