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

"""``tox -e demo``: boot an 8-GPU P2P server on an in-process Nova.

Nova's API, conductor, scheduler, placement and nova-compute run in this
process, nova-compute with our driver over Nova's libvirt test double
(libvirt 10.0, QEMU 8.2). The built-in host is an HGX board: eight H100s
on NVSwitches run by NVIDIA Fabric Manager (a stand-in library), four
NICs beside them, two NUMA nodes. One server gets all eight GPUs, the
four NICs and two NUMA cells; the demo prints the nova.conf line that
loads the driver, the board's Fabric Manager partitions, the partition
the driver activated for the server before libvirt started it, the
cliques, the expander-bus layout, the vCPU pinning and the NCCL topology
the guest agent writes inside that guest, and writes the domain XML Nova
defined to a file it names: in a new directory each run, or where
``--xml`` says. Exits non-zero when the server does not go ACTIVE.
"""

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time

# This checkout first, as stestr runs the functional tests, so the demo
# shows this tree's driver even where an older copy is installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from lxml import etree  # noqa: E402
from oslo_utils import versionutils  # noqa: E402

from lab import cloud_runner  # noqa: E402
from lab import pci_xml  # noqa: E402
from nova_gpu_p2p.fabric import nvfm  # noqa: E402
from nova_gpu_p2p.guest import topology_description  # noqa: E402
from nova_gpu_p2p_guest import cli  # noqa: E402
from tests.fixtures import guest_sysfs  # noqa: E402


def _title(text: str) -> None:
    print('\n== %s' % text)


def _cpus(cpus: list[int]) -> str:
    return ','.join(str(cpu) for cpu in cpus)


#: The directory a run makes for the domain XML unless ``--xml`` names a
#: file: a new one per run, in the temporary directory.
XML_DIR_PREFIX = 'nova-gpu-p2p-demo-'


def xml_output(requested: str | None) -> str:
    """``--xml``'s value, else ``domain.xml`` in a new directory."""
    if requested:
        return requested
    folder = tempfile.mkdtemp(prefix=XML_DIR_PREFIX)
    return os.path.join(folder, 'domain.xml')


def report(found, xml_path: str) -> None:
    """Print one run of ``HGXCloud.demo`` for people.

    The domain XML (some 300 lines) goes to ``xml_path``, or after the
    summary when that is ``-``, so that the summary is what is read first.
    """
    from lab import demo_cloud

    topology = found.topology
    print('nova-gpu-p2p demo: Nova API, conductor, scheduler, placement and '
          'nova-compute in one process, nova-compute with this nova.conf:')
    print('\n  [DEFAULT]\n  compute_driver = %s' % found.compute_driver)
    print('\n  (Nova loads nova.virt.%s: the one-line module nova/virt/'
          'gpu_p2p.py that this package installs into Nova gives it %s.)'
          % (found.compute_driver, found.driver))

    libvirt, qemu = map(versionutils.convert_version_to_str, found.versions)
    _title('Host %s (corpus host %s): libvirt %s, QEMU %s' % (
        demo_cloud.HOSTNAME, demo_cloud.CORPUS_HOST, libvirt, qemu))
    print('Topology backend: %s' % demo_cloud.BACKEND_NOTE)
    modules = found.module_ids
    print('\n  %-14s %-6s %-5s %-12s %-11s %s' % (
        'GPU', 'device', 'NUMA', 'root complex', 'host clique', 'module'))
    for gpu in topology.gpus():
        clique = found.host_cliques.get(gpu.address)
        print('  %-14s %-6s %-5s %-12s %-11s %s' % (
            gpu.address, '%04x' % gpu.device, gpu.numa_node,
            gpu.root_complex, '-' if clique is None else clique,
            modules.get(gpu.address, '?')))
    print('  (module: the HGX module ID, which names the GPU to Fabric '
          'Manager, as the backend kept it in [gpu_p2p] module_id_file)')
    print('\n  %-14s %-6s %-5s %s' % ('NIC', 'device', 'NUMA',
                                      'root complex'))
    for nic in sorted((f for f in topology.functions.values() if f.is_nic),
                      key=lambda f: f.address):
        print('  %-14s %-6s %-5s %s' % (nic.address, '%04x' % nic.device,
                                        nic.numa_node, nic.root_complex))
    print('\n  NVSwitches: %s' % ', '.join(demo_cloud.nvswitches(topology)))
    print('\n  %-5s %-22s %s' % ('node', 'CPUs (Nova\'s host)',
                                 'distances (sysfs)'))
    for node in topology.numa_nodes:
        print('  %-5s %-22s %s' % (node.id, _cpus(
            found.host_node_cpus.get(node.id, [])),
            ' '.join(str(d) for d in node.distances)))
    print('  (Nova\'s libvirt test double gives the host %d CPUs; the '
          'sysfs tree has the real machine\'s.)' % sum(
              len(cpus) for cpus in found.host_node_cpus.values()))

    _partitions(found, modules)

    _title('Flavor extra specs')
    for key, value in sorted(found.extra_specs.items()):
        print('  %s=%s' % (key, value))
    options = found.options
    print('  [gpu_p2p] topology_backend=%s p2p_level=%s '
          'expander_bus_grouping=%s align_device_types=%s pcihole64=%s' % (
              options['topology_backend'], options['p2p_level'],
              options['expander_bus_grouping'],
              ','.join(options['align_device_types']),
              options['pcihole64']))

    server = found.server
    _title('Server %s: %s on %s' % (server['id'], server['status'],
                                    server['OS-EXT-SRV-ATTR:host']))

    _activation(found, modules)

    xml = found.xml
    _title('Cliques per GPU (<qemu:override> x-nv-gpudirect-clique)')
    guest = demo_cloud.cliques(xml)
    for gpu in topology.gpus():
        if gpu.address in guest:
            print('  %s  clique %d' % (gpu.address, guest[gpu.address]))
    groups = sorted(set(guest.values()))
    print('  -> %d GPU(s) in %d clique(s)' % (len(guest), len(groups)))

    _title('PCIe expander buses (pxb-pcie)')
    kinds = {f.address: 'GPU' if f.is_gpu else 'NIC' if f.is_nic else ''
             for f in topology.functions.values()}
    for bus in demo_cloud.expander_buses(xml):
        print('  index %d  busNr %d  guest NUMA node %d  (%d root ports)' % (
            bus.index, bus.bus_nr, bus.guest_node, len(bus.ports)))
        for index, slot, device in bus.ports:
            function = topology.functions.get(device)
            print('    root port index %-3d slot %d: %s %s%s' % (
                index, slot, kinds.get(device, ''), device or '(empty)',
                ' (host NUMA node %s, %s)' % (function.numa_node,
                                              function.root_complex)
                if function else ''))
    hole = xml.find("./devices/controller[@model='pcie-root']/pcihole64")
    if hole is not None:
        print('  pcie-root pcihole64: %s %s (%d GiB)' % (
            hole.text, hole.get('unit'), int(hole.text) >> 20))

    _title('vCPU pinning: guest NUMA cells (Nova\'s) against host nodes')
    for cell in demo_cloud.guest_cells(xml):
        host_cpus = set()
        for node in cell.host_nodes.split(','):
            if node.isdigit():
                host_cpus.update(found.host_node_cpus.get(int(node), []))
        pinned = sorted({int(cpu) for cpus in cell.pinning.values()
                         for cpu in cpus.split(',') if cpu.isdigit()})
        print('  guest cell %d: vCPUs %s -> host node %s (CPUs %s); '
              'distances %s' % (
                  cell.id, cell.vcpus, cell.host_nodes,
                  _cpus(sorted(host_cpus)), cell.distances or 'default'))
        print('    pinning: %s' % ', '.join(
            'vCPU %d->%s' % pin for pin in sorted(cell.pinning.items())))
        print('    every vCPU on its host node\'s CPUs: %s' % (
            'yes' if set(pinned) <= host_cpus else 'NO'))
        for bus in demo_cloud.expander_buses(xml):
            if bus.guest_node == cell.id:
                print('    devices on this cell\'s expander bus %d: %s' % (
                    bus.index, ', '.join(d for _, _, d in bus.ports if d)))

    _title('Inside the guest: NCCL\'s topology from nova-gpu-p2p-guest')
    print(_agent_output(xml))

    text = etree.tostring(xml, pretty_print=True, encoding='unicode')
    _title('Domain XML Nova defined')
    if xml_path == '-':
        print(text, end='')
    else:
        with open(xml_path, 'w', encoding='utf-8') as out:
            out.write(text)
        print('  %d lines written to %s' % (text.count('\n'), xml_path))


def _modules(gpus, modules: dict[str, int]) -> str:
    return ','.join(str(m) for m in sorted(modules.get(g, 0) for g in gpus))


def _partitions(found, modules: dict[str, int]) -> None:
    """The board's partitions by module ID, as the backend read them."""
    _title('Fabric Manager partitions (shared NVSwitch mode; [gpu_p2p] '
           'fabric_manager_address is the stand-in\'s %s)' % os.path.basename(
               found.options['fabric_manager_address']))
    print('  %-9s %-5s %-17s %s' % (
        'partition', 'GPUs', 'modules', 'active after the boot'))
    for partition in found.topology.fabric_partitions:
        print('  %-9d %-5d %-17s %s' % (
            partition.id, len(partition.gpus),
            _modules(partition.gpus, modules),
            'yes' if partition.id in found.fm_active else '-'))
    print('  (GPUs of one partition of 2+ reach each other over NVLink; '
          'a server\'s GPUs get it only when they are exactly one '
          'partition, active for it)')


def _call(line: str) -> str:
    """``fmActivateFabricPartition 0 0`` -> ``...(0): FM_ST_SUCCESS``."""
    words = line.split()
    status = int(words[-1])
    return '%s(%s): %s' % (words[0], ', '.join(words[1:-1]),
                           nvfm.STATUS_NAMES.get(status, status))


def _activation(found, modules: dict[str, int]) -> None:
    """The partition calls, and where libvirt started the domain."""
    gpus = {gpu.address for gpu in found.topology.gpus()}
    server_gpus = sorted(address for _, address in pci_xml.passthrough(
        found.xml) if address in gpus)
    _title('Partition activation: Fabric Manager\'s calls, in order')
    print('  the server\'s GPUs: modules %s' % _modules(server_gpus, modules))
    starts = set(found.domain_starts)
    reads = 0
    for index, line in enumerate(found.fm_calls + [None]):
        if index in starts:
            print('  -- libvirt starts the server\'s domain --')
        if line is None:
            break
        if line.startswith(('fmActivate', 'fmDeactivate', 'fmSetActivated')):
            print('  %s' % _call(line))
        elif line.startswith('fmGetSupportedFabricPartitions'):
            reads += 1
    print('  active now: %s; and %d fmGetSupportedFabricPartitions reads '
          '(discovery)' % (
              ', '.join('partition %d' % i for i in sorted(found.fm_active))
              or 'none', reads))


def _agent_output(xml) -> str:
    """What the guest agent writes for NCCL in this server's guest.

    The guest's sysfs is laid out as the firmware numbers it for this
    XML's expander buses, with the fw_cfg entry the XML passes to QEMU.
    """
    entry = xml.find('./sysinfo[@type="fwcfg"]/entry[@name="%s"]'
                     % topology_description.ENTRY_NAME)
    if entry is None:
        return '  (no fw_cfg topology entry in this guest)'
    with tempfile.TemporaryDirectory() as root:
        guest_sysfs.build(root, topology_description.decode(entry.text),
                          entry=entry.text)
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            cli.main(['--sysfs-root', root, '--output', '-'])
    return output.getvalue().rstrip()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog='tox -e demo --',
        description='Boot an 8-GPU P2P server on an in-process Nova with '
        'this driver and show what it built.')
    parser.add_argument(
        '--xml', metavar='PATH',
        help='write the domain XML Nova defined here; "-" prints it after '
        'the summary (default: domain.xml in a new %s* directory in %s, '
        'named at the end)' % (XML_DIR_PREFIX, tempfile.gettempdir()))
    args = parser.parse_args(argv)
    start = time.monotonic()

    def step(text: str) -> str:
        return '  [%3.0f s] %s' % (time.monotonic() - start, text)

    print('Booting a server on an in-process Nova (1 to 3 minutes on a '
          'busy 2-core machine; Nova\'s own output is kept and shown only '
          'if it fails):', flush=True)
    print(step('importing Nova...'), flush=True)
    # Before anything of Nova is imported: eventlet patching, as Nova's
    # functional tests do.
    cloud_runner.patch_first()
    try:
        found = cloud_runner.run('demo', progress=step)
    except cloud_runner.CloudFailed as exc:
        print('The server did not go ACTIVE or the demo failed:\n%s' % exc,
              file=sys.stderr)
        return 1
    print(step('done.'), flush=True)
    path = xml_output(args.xml)
    for result in found:
        report(result, path)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
