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

"""``tox -e bench``'s privsep sections: config space through nova-compute's
privileged daemon, per call and batched (:data:`PRIVSEP`, as root), and
how long a greenthread waits while discovery runs under eventlet
(:data:`STALL`).

Each runs in a fresh interpreter (``bench.py --child``), so that the
daemon, a private mount namespace and eventlet's monkey patching stay out
of the other sections.
"""

from collections.abc import Callable
from collections.abc import Sequence
import ctypes
import functools
import json
import os
import statistics
import subprocess
import sys
import time

from oslo_config import cfg

from lab import bench_tools
from nova_gpu_p2p import pci_address
from nova_gpu_p2p import privsep
from nova_gpu_p2p.topology import discovery
from nova_gpu_p2p.topology import pci_config
from nova_gpu_p2p.topology import sysfs

#: ``lab/bench.py``, which runs each child.
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'bench.py')
#: Rounds and --quick, set by bench.py's main (:func:`configure`).
SETTINGS = {'privsep_rounds': 7, 'stall_rounds': 7, 'quick': False}


def configure(privsep_rounds: int, stall_rounds: int, quick: bool) -> None:
    """This run's sizes, in the parent and in each child."""
    SETTINGS.update(privsep_rounds=privsep_rounds, stall_rounds=stall_rounds,
                    quick=quick)


#: Config space through nova-compute's privsep daemon (as root only).
PRIVSEP = 'privsep_config_reads'
#: The longest a greenthread waits while discovery runs (under eventlet).
STALL = 'discovery_greenthread_stall'
#: The ticker greenthread's sleep: its gaps beyond this are the stall.
TICK_S = 0.001
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000


def child(mode: str, eventlet: bool = False, timeout: float = 900,
          first_path: str | None = None, options: Sequence[str] = ()
          ) -> dict:
    """``mode`` in a fresh interpreter, for its JSON result.

    bench.py's capacity section runs this way too. Fresh, so that the
    privsep daemon, a private mount namespace and eventlet's monkey
    patching stay out of the other benchmarks; eventlet patches first, as
    nova-compute does.

    :param first_path: a directory the child imports from before its
        site-packages (a patched copy of a package).
    :param options: bench.py's options the child is to run with.
    """
    argv = [BENCH, '--child', mode, *options]
    if SETTINGS['quick']:
        argv.append('--quick')
    code = ('import runpy, sys; sys.argv = %r; '
            'runpy.run_path(sys.argv[0], run_name="__main__")' % argv)
    if eventlet:
        code = 'import eventlet; eventlet.monkey_patch(); ' + code
    env = dict(os.environ)
    if first_path:
        env['PYTHONPATH'] = os.pathsep.join(
            filter(None, (first_path, env.get('PYTHONPATH'))))
    proc = subprocess.run([sys.executable, '-W', 'ignore', '-c', code],
                          capture_output=True, text=True, timeout=timeout,
                          env=env)
    if proc.returncode:
        raise RuntimeError('%s failed:\n%s' % (mode, proc.stderr[-3000:]))
    return json.loads(proc.stdout.splitlines()[-1])


def _libc_call(name: str, *args) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        error = ctypes.get_errno()
        raise OSError(error, '%s: %s' % (name, os.strerror(error)))


def _private_mounts() -> str | None:
    """Put this process in a mount namespace of its own; None, or why not.

    Then a corpus tree can be bound over /sys, which is the only sysfs
    the privileged read knows, without the rest of the machine seeing it.
    """
    try:
        _libc_call('unshare', _CLONE_NEWNS)
        _libc_call('mount', b'none', b'/', None, _MS_REC | _MS_PRIVATE, None)
    except OSError as exc:
        return str(exc)
    return None


def _bind_over_sys(tree: str) -> None:
    _libc_call('mount', tree.encode(), privsep.SYS.encode(), None, _MS_BIND,
               None)


def _start_privsep_daemon() -> str:
    """Nova's sys_admin privsep daemon, serving this checkout's code.

    Started as nova-compute starts it, a privsep-helper process, only
    without sudo (we are root); oslo.privsep's fork method where the
    helper is not installed.
    """
    from nova import privsep as nova_privsep
    from oslo_privsep import priv_context
    cfg.CONF([], project='nova', default_config_files=[])
    helper = os.path.join(os.path.dirname(sys.executable), 'privsep-helper')
    method = priv_context.Method.FORK
    if os.path.exists(helper):
        cfg.CONF.set_override('helper_command', 'env PYTHONPATH=%s %s' % (
            CHECKOUT, helper), group='nova_sys_admin')
        method = priv_context.Method.ROOTWRAP
    nova_privsep.sys_admin_pctxt.start(method=method)
    return 'privsep-helper' if method is priv_context.Method.ROOTWRAP \
        else 'fork'


def _through_daemon() -> None:
    """Discovery of /sys through the daemon although we are root."""
    sysfs.read_host_configs = functools.partial(sysfs.read_host_configs,
                                                via_daemon=True)


def _interleaved(funcs: dict[str, Callable[[], object]],
                 rounds: int) -> dict[str, float]:
    """Fastest call of each, the calls taking turns round by round.

    On a shared machine the load then weighs on all of them alike.
    """
    times: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(rounds):
        for name, func in funcs.items():
            times[name].append(bench_tools.best(func, 1))
    return {name: min(found) for name, found in times.items()}


def _machine_addresses() -> tuple[list[str], str]:
    """This machine's PCI bridges, or all its functions if under two."""
    devices = os.path.join(privsep.SYS, 'bus', 'pci', 'devices')
    names = sorted(n for n in os.listdir(devices) if pci_address.is_sysfs(n))
    bridges = []
    for name in names:
        with open(os.path.join(devices, name, 'class')) as f:
            if int(f.read(), 16) >> 8 == 0x0604:
                bridges.append(name)
    if len(bridges) >= 2:
        return bridges, 'bridges'
    return names, 'functions'


def _reads(addresses: list[str]) -> dict:
    """One privileged call per address, one for all, and no daemon."""
    size = pci_config.EXTENDED_SIZE

    def one_per_call():
        for address in addresses:
            privsep.read_pci_configs([address], size)

    found = _interleaved({
        'one_per_call_seconds': one_per_call,
        'batched_seconds': lambda: privsep.read_pci_configs(addresses, size),
        'in_process_seconds': lambda: privsep.read_configs(
            privsep.SYS, addresses, size)}, SETTINGS['privsep_rounds'])
    found['addresses'] = len(addresses)
    return found


def _round_trip(address: str, calls: int = 200) -> float:
    """A privileged call's own cost: one byte, less reading it here."""
    def through(): privsep.read_pci_configs([address], 1)  # noqa: E704

    def here(): privsep.read_configs(privsep.SYS, [address], 1)  # noqa: E704

    found = _interleaved({'through': lambda: [through() for _ in range(calls)],
                          'here': lambda: [here() for _ in range(calls)]},
                         SETTINGS['privsep_rounds'])
    return max(0.0, (found['through'] - found['here']) / calls)


def _one_call_per_address(addresses: list[str]) -> sysfs.Configs:
    """read_host_configs as it would be without the batch."""
    result = {}
    for address in addresses:
        result.update(privsep.read_pci_configs(
            [address], pci_config.EXTENDED_SIZE))
    return result


def _kernel_read(addresses: list[str]) -> float:
    """The kernel's cost of one 4 KiB config read here, no daemon."""
    devices = os.path.join(privsep.SYS, 'bus', 'pci', 'devices')
    extended = [a for a in addresses if os.stat(os.path.join(
        devices, a, 'config')).st_size >= pci_config.EXTENDED_SIZE]
    return statistics.median(bench_tools.best(
        lambda: privsep.read_configs(privsep.SYS, [address],
                                     pci_config.EXTENDED_SIZE),
        SETTINGS['privsep_rounds']) for address in extended or addresses)


def child_privsep() -> dict:
    """Per-call against batched privileged reads, and discovery.

    First on this machine's /sys, then on the goal host's tree bound over
    /sys in a private mount namespace.
    """
    namespace = _private_mounts()  # before any thread: threads inherit it
    how = _start_privsep_daemon()
    addresses, kind = _machine_addresses()
    results = {'daemon': how, 'address_kind': kind,
               'machine': _reads(addresses),
               'round_trip_seconds': _round_trip(addresses[0]),
               'kernel_read_seconds': _kernel_read(addresses)}
    tree = bench_tools.tree(bench_tools.DISCOVERY_GOAL_HOST)
    direct_opts, opts = bench_tools.opts(tree), bench_tools.opts(privsep.SYS)
    direct = sysfs.SysfsBackend(direct_opts,
                                read_config=sysfs.read_config_direct)
    expected = direct.discover()
    bridges = sorted(a for a, f in expected.functions.items()
                     if f.is_bridge)
    large = results['large_host'] = {
        'host': bench_tools.DISCOVERY_GOAL_HOST,
        'pci_functions': len(expected.functions),
        'bridges': len(bridges)}
    timed = {'direct_seconds': lambda: discovery.evaluate(direct.discover(),
                                                          direct_opts)}
    if namespace is None:
        _bind_over_sys(tree)
        large['reads'] = _reads(bridges)
        backend = sysfs.SysfsBackend(opts)
        batched = functools.partial(sysfs.read_host_configs, via_daemon=True)

        def through_daemon(read: Callable[..., sysfs.Configs]) -> object:
            sysfs.read_host_configs = read
            return discovery.evaluate(backend.discover(), opts)

        if through_daemon(batched).topology != expected:
            raise RuntimeError('discovery through privsep differs')
        timed['privsep_seconds'] = lambda: through_daemon(batched)
        timed['privsep_one_per_call_seconds'] = lambda: through_daemon(
            _one_call_per_address)
    else:
        large['not_measured'] = ('no private mount namespace for its tree '
                                 '(%s)' % namespace)
    large.update(_interleaved(timed, SETTINGS['privsep_rounds']))
    rtt = results['round_trip_seconds']
    large['estimate_batched_seconds'] = large['direct_seconds'] + rtt
    large['estimate_one_per_call_seconds'] = (
        large['direct_seconds'] + len(bridges) * rtt)
    large['kernel_reads_seconds'] = (len(bridges)
                                     * results['kernel_read_seconds'])
    return results


def _stalls(eventlet, variants: dict[str, Callable[[], object]]) -> dict:
    """Longest gap a 1 ms ticker greenthread sees while each runs.

    The variants take turns, round by round, so load from elsewhere on
    the machine weighs on each alike.
    """
    state = {'max': 0.0}

    def ticker():
        last = time.perf_counter()
        while True:
            eventlet.sleep(TICK_S)
            now = time.perf_counter()
            state['max'] = max(state['max'], now - last)
            last = now

    thread = eventlet.spawn(ticker)
    took: dict[str, list[float]] = {name: [] for name in variants}
    gaps: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for call in variants.values():
            call()  # warm
        for _ in range(SETTINGS['stall_rounds']):
            for name, call in variants.items():
                eventlet.sleep(0.02)
                state['max'] = 0.0
                start = time.perf_counter()
                call()
                took[name].append(time.perf_counter() - start)
                eventlet.sleep(TICK_S * 3)  # the ticker sees the end of it
                gaps[name].append(state['max'])
    finally:
        thread.kill()
    return {name: {'discovery_seconds': statistics.median(took[name]),
                   'max_gap_seconds': max(gaps[name]),
                   'median_max_gap_seconds': statistics.median(gaps[name])}
            for name in variants}


def _compute_driver(cls: type) -> object:
    """The driver as nova-compute constructs it, on Nova's libvirt double.

    Constructed whole, so that the benchmark calls the driver's own
    discovery as it stands, whatever state that needs.
    """
    from nova.tests.fixtures import libvirt as libvirt_fixture
    # Held until this child exits: the driver keeps Nova's test double.
    libvirt_fixture.LibvirtFixture().setUp()
    return cls(None)


def child_stall() -> dict:
    """Discovery of the goal host on the hub and in a native thread."""
    import eventlet
    from nova import conf as nova_conf
    from nova import monkey_patch

    from nova_gpu_p2p.compute import driver
    monkey_patch.MONKEY_PATCHED = True  # as nova-compute under eventlet
    nova = nova_conf.CONF
    nova([], project='nova', default_config_files=[])
    tree = bench_tools.tree(bench_tools.DISCOVERY_GOAL_HOST)
    # Before any thread: threads inherit the namespace.
    namespace = (_private_mounts() if os.geteuid() == 0
                 else 'not root: no privsep daemon')
    nova.set_override('sysfs_root', tree, group='gpu_p2p')
    compute = _compute_driver(driver.GPUP2PLibvirtDriver)
    variants = {
        'hub': lambda: discovery.discover(nova, compute.host_gpus),
        'native_thread': compute.refresh_host_gpus,
    }
    expected = discovery.discover(nova).topology
    results = {'host': bench_tools.DISCOVERY_GOAL_HOST, 'tick_seconds': TICK_S,
               'rounds': SETTINGS['stall_rounds'],
               'tree': _stalls(eventlet, variants)}
    if namespace is None:
        _bind_over_sys(tree)
        results['daemon'] = _start_privsep_daemon()
        _through_daemon()
        nova.set_override('sysfs_root', privsep.SYS, group='gpu_p2p')
        if compute.refresh_host_gpus().topology != expected:
            raise RuntimeError('discovery through privsep differs')
        results['privsep'] = _stalls(eventlet, variants)
    else:
        results['privsep_not_measured'] = namespace
    return results


def privsep_reads() -> dict:
    if os.geteuid() != 0:
        return {'skipped': 'not root: cannot start nova\'s privsep daemon'}
    return child('privsep')


def greenthread_stall() -> dict:
    return child('stall', eventlet=True)


def _ms(seconds: float) -> str:
    return '%.2f ms' % (seconds * 1e3)


def _print_reads(reads: dict) -> None:
    print('    %-48s %12s' % ('one call per address (%d calls)'
                              % reads['addresses'],
                              _ms(reads['one_per_call_seconds'])))
    print('    %-48s %12s' % ('one batched call',
                              _ms(reads['batched_seconds'])))
    print('    %-48s %12s' % ('the same reads in this process, no daemon',
                              _ms(reads['in_process_seconds'])))


def print_privsep_reads(result: dict) -> None:
    if 'skipped' in result:
        print('\n%s: skipped, %s' % (PRIVSEP, result['skipped']))
        return
    print('\nConfig space (4096 bytes each) through nova\'s sys_admin '
          'privsep daemon (%s), best of %d' % (result['daemon'],
                                               SETTINGS['privsep_rounds']))
    print('  this machine\'s /sys, its PCI %s:' % result['address_kind'])
    _print_reads(result['machine'])
    print('  a privileged call\'s round trip: %s'
          % _ms(result['round_trip_seconds']))
    large = result['large_host']
    print('  %s (%d functions, %d bridges):' % (
        large['host'], large['pci_functions'], large['bridges']))
    if 'reads' in large:
        print('  its bridges, its tree bound over /sys in a private mount '
              'namespace:')
        _print_reads(large['reads'])
    rows = [('discovery, config read from the tree',
             large['direct_seconds'])]
    if 'privsep_seconds' in large:
        rows += [('discovery through the daemon, batched (measured)',
                  large['privsep_seconds']),
                 ('discovery, one call per bridge (measured)',
                  large['privsep_one_per_call_seconds'])]
    rows += [('estimate: + one round trip', large['estimate_batched_seconds']),
             ('estimate: + one round trip per bridge',
              large['estimate_one_per_call_seconds'])]
    for title, seconds in rows:
        print('    %-48s %12s' % (title, _ms(seconds)))
    if 'not_measured' in large:
        print('    not measured through the daemon: %s'
              % large['not_measured'])
    print('    plus, on real hardware, the kernel reading %d config '
          'spaces: %s at this machine\'s %s per 4 KiB read (either way)'
          % (large['bridges'], _ms(large['kernel_reads_seconds']),
             _ms(result['kernel_read_seconds'])))


def print_greenthread_stall(result: dict) -> None:
    print('\nLongest wait of a greenthread ticking every %s while '
          'discovery of %s runs (eventlet, %d rounds)' % (
              _ms(result['tick_seconds']), result['host'], result['rounds']))
    print('  %-40s %12s %14s %14s' % ('', 'discovery', 'max stall',
                                      'median stall'))
    for source in ('tree', 'privsep'):
        for name, found in result.get(source, {}).items():
            print('  %-40s %12s %14s %14s' % (
                '%s, %s' % ('config from the tree' if source == 'tree'
                            else 'config through privsep',
                            'on the hub (before)' if name == 'hub'
                            else 'native thread (now)'),
                _ms(found['discovery_seconds']),
                _ms(found['max_gap_seconds']),
                _ms(found['median_max_gap_seconds'])))
    if 'privsep_not_measured' in result:
        print('  through privsep: not measured, %s'
              % result['privsep_not_measured'])
