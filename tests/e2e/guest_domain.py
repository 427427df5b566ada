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

"""Nova's domain XML for a two-cell P2P guest, made bootable on this host.

:func:`capture` runs Nova's in-process cloud (API, scheduler, placement,
nova-compute with our driver over Nova's libvirt test double) in a child
Python, so that Nova's fixtures, eventlet and log output stay out of the
boot test's process, and returns the XML Nova passed to libvirt.

:func:`bootable` turns that XML into one this machine can start; every
change is listed in :attr:`Bootable.changes` and the test prints them.
Only one change is about the devices: each passthrough device becomes an
emulated PCIe device (virtio-rng) at the same guest ``<address>``, on the
same root port under the same expander bus. Everything else adapts the
run to a CI machine (TCG, one NUMA node, two CPUs, no disk image).
"""

import copy
import dataclasses
import json
import os
import subprocess
import sys
import unittest

from lxml import etree
import tests

#: The corpus host: four NUMA nodes, one root complex each, two GPUs on
#: each of the first three; distances 10/12/32 (not Linux's 10/20
#: default, so a copied SLIT is told apart from an invented one).
CORPUS_HOST = 'four-numa-7gpu'
HOSTNAME = 'numa4-1'
#: Four GPUs over two guest cells: Nova's legacy PCI NUMA policy must take
#: both GPUs of each host node the cells land on, so both cells get two.
GPUS = 4
GUEST_NODES = 2
VCPUS = 4
EXTRA_SPECS = {
    'hw:gpu_p2p_clique': 'auto',
    'hw:gpu_numa_affinity': 'required',
}
QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0'
#: The stand-in: a PCIe (virtio 1.0) function with no host side to set
#: up. Its IDs tell it apart from every other function of the guest.
STAND_IN_VENDOR = 0x1af4
STAND_IN_DEVICE = 0x1044
#: A named CPU model TCG emulates; host-passthrough needs KVM.
TCG_CPU_MODEL = 'qemu64'


@dataclasses.dataclass
class Captured:
    """What the in-process Nova produced and knew."""

    xml: str
    #: Fake host NUMA node -> its CPUs, as Nova's host reported them.
    host_node_cpus: dict[int, list[int]]
    #: Host NUMA node -> distances to nodes 0.., from the corpus host.
    host_distances: dict[int, list[int]]
    #: Host NUMA node of each guest cell, as Nova fitted them.
    host_cells: list[int]


def _capture_in_process() -> Captured:
    """Boot the server on Nova's in-process cloud; its XML and facts."""
    # Nothing of Nova is imported before the output is redirected.
    from tests.fixtures import output

    found: list[Captured] = []
    with output.quiet() as log:
        from tests.cloud import nova_cloud as base
        from tests.fixtures import hosts

        class Cloud(base.GPUHostsTestBase):
            def test_capture(self) -> None:
                self.start_gpu_compute(HOSTNAME, CORPUS_HOST)
                flavor = self.gpu_flavor(
                    GPUS, numa_nodes=GUEST_NODES, vcpus=VCPUS,
                    extra_specs=EXTRA_SPECS)
                server = self.boot(flavor)
                drv = self.computes[HOSTNAME].driver
                cells = drv._host.get_capabilities().host.topology.cells
                xml = self.defined_xml[server['id']]
                nodesets = [m.get('nodeset') for m in etree.fromstring(
                    xml).iterfind('./numatune/memnode')]
                found.append(Captured(
                    xml=xml,
                    host_node_cpus={c.id: sorted(cpu.id for cpu in c.cpus)
                                    for c in cells},
                    host_distances={
                        n.id: list(n.distances)
                        for n in hosts.HOSTS[CORPUS_HOST].numa_nodes},
                    host_cells=[int(n) for n in nodesets]))

        result = unittest.TestResult()
        Cloud('test_capture').run(result)
    problems = result.errors + result.failures
    if problems or not found:
        log.seek(0)
        raise RuntimeError('in-process Nova did not build the server:\n%s\n%s'
                           % (log.read()[-6000:],
                              '\n'.join(text for _, text in problems)))
    return found[0]


def capture(timeout: float = 300) -> Captured:
    """:func:`_capture_in_process` in a child Python (see module doc)."""
    process = subprocess.run(
        [sys.executable, '-m', __name__], capture_output=True, text=True,
        timeout=timeout, cwd=tests.ROOT)
    if process.returncode:
        raise RuntimeError('capturing Nova\'s XML failed (%d):\n%s\n%s' % (
            process.returncode, process.stdout[-4000:],
            process.stderr[-4000:]))
    data = json.loads(process.stdout.strip().splitlines()[-1])
    data['host_node_cpus'] = {int(k): v
                              for k, v in data['host_node_cpus'].items()}
    data['host_distances'] = {int(k): v
                              for k, v in data['host_distances'].items()}
    return Captured(**data)


# The XML, read.

def cpu_set(text: str) -> list[int]:
    """A libvirt cpuset ("0-3,6,^2") as a sorted list."""
    cpus: set[int] = set()
    for part in text.split(','):
        part = part.strip()
        exclude = part.startswith('^')
        low, _, high = part.lstrip('^').partition('-')
        span = set(range(int(low), int(high or low) + 1))
        cpus = cpus - span if exclude else cpus | span
    return sorted(cpus)


def _format_cpus(cpus: list[int]) -> str:
    return ','.join(str(cpu) for cpu in sorted(set(cpus)))


def vcpu_pins(domain: etree._Element) -> dict[int, list[int]]:
    """vCPU -> host CPUs, from ``<cputune><vcpupin>``."""
    return {int(pin.get('vcpu')): cpu_set(pin.get('cpuset'))
            for pin in domain.iterfind('./cputune/vcpupin')}


def guest_cells(domain: etree._Element) -> dict[int, list[int]]:
    """Guest cell -> its vCPUs, from ``<cpu><numa>``."""
    return {int(cell.get('id')): cpu_set(cell.get('cpus'))
            for cell in domain.iterfind('./cpu/numa/cell')}


def cell_distances(domain: etree._Element) -> dict[int, list[int]]:
    """Guest cell -> distances to cells 0.., from ``<distances>``."""
    result = {}
    for cell in domain.iterfind('./cpu/numa/cell'):
        siblings = {int(s.get('id')): int(s.get('value'))
                    for s in cell.iterfind('./distances/sibling')}
        result[int(cell.get('id'))] = [siblings[i]
                                       for i in sorted(siblings)]
    return result


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the layout put one passthrough device in the guest."""

    #: What it was: the hostdev's host address, or the NIC's MAC.
    host_device: str
    #: The guest <address> it had, and its stand-in gets.
    guest_address: str
    #: busNr of its pcie-expander-bus; None: not under one.
    bus_nr: int | None
    #: Slot of its root port on the expander bus.
    port_slot: int | None
    #: The expander bus's <node>: the guest cell the layout promised.
    guest_node: int | None


def _hex(text: str) -> int:
    return int(text, 16)


def _guest_address(address: etree._Element) -> str:
    return '%04x:%02x:%02x.%x' % tuple(
        _hex(address.get(name)) for name in ('domain', 'bus', 'slot',
                                             'function'))


def _passthrough(domain: etree._Element) -> list[etree._Element]:
    devices = domain.find('devices')
    return (devices.findall("./hostdev[@type='pci']")
            + devices.findall("./interface[@type='hostdev']"))


def placements(domain: etree._Element) -> list[Placement]:
    """Every passthrough device with the expander bus the layout chose."""
    controllers = {int(c.get('index')): c for c in domain.iterfind(
        "./devices/controller[@type='pci']")}
    result = []
    for device in _passthrough(domain):
        address = device.find("./address[@type='pci']")
        source = device.find('./source/address')
        if source is not None:
            host = _guest_address(source)
        else:
            host = device.find('./mac').get('address')
        port = controllers.get(_hex(address.get('bus')))
        bus_nr = slot = node = None
        if port is not None and port.get('model') == 'pcie-root-port':
            port_address = port.find('address')
            expander = controllers.get(_hex(port_address.get('bus')))
            if (expander is not None
                    and expander.get('model') == 'pcie-expander-bus'):
                bus_nr = int(expander.find('target').get('busNr'))
                node = int(expander.findtext('./target/node'))
                slot = _hex(port_address.get('slot'))
        result.append(Placement(host, _guest_address(address), bus_nr,
                                slot, node))
    return result


def port_links(domain: etree._Element) -> dict[str, dict[str, str]]:
    """Host device -> its root port's ``x-speed``/``x-width`` override.

    libvirt names PCI controller N ``pci.N``; the override of that alias
    is what QEMU's pcie-root-port reports as its link.
    """
    overrides = {}
    for device in domain.iterfind('./{%s}override/{%s}device'
                                  % (QEMU_NS, QEMU_NS)):
        overrides[device.get('alias')] = {
            p.get('name'): p.get('value') for p in device.iterfind(
                './{%s}frontend/{%s}property' % (QEMU_NS, QEMU_NS))
            if p.get('name') in ('x-speed', 'x-width')}
    result = {}
    for placement, device in zip(placements(domain), _passthrough(domain)):
        bus = _hex(device.find("./address[@type='pci']").get('bus'))
        found = overrides.get('pci.%d' % bus)
        if found:
            result[placement.host_device] = found
    return result


# This machine.

def host_nodes(sysfs: str = '/sys') -> dict[int, list[int]]:
    """This machine's NUMA nodes and their online CPUs (ours to use)."""
    allowed = os.sched_getaffinity(0)
    root = os.path.join(sysfs, 'devices/system/node')
    nodes = {}
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        if name.startswith('node') and name[4:].isdigit():
            with open(os.path.join(root, name, 'cpulist')) as cpulist:
                text = cpulist.read().strip()
            cpus = [c for c in cpu_set(text) if c in allowed] if text else []
            if cpus:
                nodes[int(name[4:])] = cpus
    return nodes or {0: sorted(allowed)}


@dataclasses.dataclass
class HostMapping:
    """Nova's fake host (more CPUs and nodes) folded onto this machine.

    libvirt checks ``<numatune>`` nodesets and pinning cpusets against the
    machine it runs on. Fake host node N maps to this machine's node
    ``nodes[N % len(nodes)]``; fake CPU C, the i-th CPU of its fake node,
    to the (i mod n)-th of the mapped node's n CPUs.
    """

    fake_node_cpus: dict[int, list[int]]
    nodes: dict[int, list[int]]

    def node(self, fake: int) -> int:
        ids = sorted(self.nodes)
        return ids[fake % len(ids)]

    def cpu(self, fake: int) -> int:
        for fake_node, cpus in self.fake_node_cpus.items():
            if fake in cpus:
                mine = self.nodes[self.node(fake_node)]
                return mine[cpus.index(fake) % len(mine)]
        raise ValueError('CPU %d is on no node of Nova\'s host' % fake)

    def nodeset(self, text: str) -> str:
        return _format_cpus([self.node(n) for n in cpu_set(text)])

    def cpuset(self, text: str) -> str:
        return _format_cpus([self.cpu(c) for c in cpu_set(text)])

    def describe(self) -> str:
        return '; '.join('Nova host node %d (CPUs %s) -> node %d CPUs %s' % (
            node, _format_cpus(cpus), self.node(node),
            _format_cpus(self.nodes[self.node(node)]))
            for node, cpus in sorted(self.fake_node_cpus.items()))


# The bootable domain.

@dataclasses.dataclass
class Bootable:
    xml: str
    name: str
    console_log: str
    #: What was changed from Nova's XML, and why; the test prints it.
    changes: list[str]


def _stand_in(device: etree._Element) -> etree._Element:
    """A virtio-rng at the device's guest <address>."""
    rng = etree.Element('rng', model='virtio')
    etree.SubElement(rng, 'backend', model='random').text = '/dev/urandom'
    rng.append(copy.deepcopy(device.find("./address[@type='pci']")))
    return rng


def bootable(nova_xml: str, mapping: HostMapping, name: str,
             workdir: str, kernel: str, initrd: str, cmdline: str,
             ovmf: tuple[str, str] | None = None, acpi: bool = True
             ) -> Bootable:
    """Nova's XML, changed only as far as this machine needs."""
    domain = etree.fromstring(nova_xml)
    changes = []

    # 1. The devices: the one change about what is being tested.
    devices = domain.find('devices')
    aliases = set()
    for device in _passthrough(domain):
        alias = device.find('alias')
        if alias is not None:
            aliases.add(alias.get('name'))
        device.addprevious(_stand_in(device))
        devices.remove(device)
    changes.append(
        'each passthrough device replaced by an emulated PCIe device '
        '(virtio-rng %04x:%04x) at the same guest <address>, on the same '
        'root port and expander bus' % (STAND_IN_VENDOR, STAND_IN_DEVICE))
    override = domain.find('{%s}override' % QEMU_NS)
    if override is not None:
        for qdevice in override.findall('{%s}device' % QEMU_NS):
            if qdevice.get('alias') in aliases:
                override.remove(qdevice)
        if not len(override):
            domain.remove(override)
        changes.append(
            '<qemu:override> entries of the replaced devices removed: QEMU '
            'refuses x-nv-gpudirect-clique on anything but an NVIDIA '
            'display-class vfio-pci device')

    # 2. Adaptations of the run to this machine.
    domain.set('type', 'qemu')
    changes.append('domain type kvm -> qemu (TCG): this CPU has no '
                   'hardware virtualisation')
    cpu = domain.find('cpu')
    for key in list(cpu.attrib):
        del cpu.attrib[key]
    cpu.set('mode', 'custom')
    cpu.set('match', 'exact')
    model = etree.Element('model', fallback='forbid')
    model.text = TCG_CPU_MODEL
    cpu.insert(0, model)
    changes.append('<cpu mode=host-passthrough> -> custom model %s (TCG '
                   'cannot pass the host CPU through); topology and NUMA '
                   'cells kept' % TCG_CPU_MODEL)
    for element in domain.iterfind('./numatune/*'):
        element.set('nodeset', mapping.nodeset(element.get('nodeset')))
    for element in domain.iterfind('./cputune/*'):
        if element.get('cpuset') is not None:
            element.set('cpuset', mapping.cpuset(element.get('cpuset')))
    changes.append('<numatune> nodesets and <cputune> cpusets mapped onto '
                   'this machine: %s' % mapping.describe())
    for disk in devices.findall('disk'):
        devices.remove(disk)
    for graphics in devices.findall('graphics'):
        devices.remove(graphics)
    for serial in devices.findall('serial') + devices.findall('console'):
        devices.remove(serial)
    console_log = os.path.join(workdir, '%s.console.log' % name)
    serial = etree.Element('serial', type='file')
    etree.SubElement(serial, 'source', path=console_log)
    etree.SubElement(serial, 'target', port='0')
    devices.insert(0, serial)
    changes.append('disks and VNC removed (no image); serial console to '
                   'a file the test reads')
    os_element = domain.find('os')
    for element in os_element.findall('boot'):
        os_element.remove(element)
    for tag, text in (('kernel', kernel), ('initrd', initrd),
                      ('cmdline', cmdline)):
        etree.SubElement(os_element, tag).text = text
    if ovmf is not None:
        loader = etree.Element('loader', readonly='yes', type='pflash',
                               secure='no')
        loader.text = ovmf[0]
        nvram = etree.Element('nvram', template=ovmf[1])
        nvram.text = os.path.join(workdir, '%s_VARS.fd' % name)
        os_element.insert(1, nvram)
        os_element.insert(1, loader)
        changes.append('UEFI: explicit OVMF loader %s with variables from '
                       '%s (libvirt 9.0 refuses Nova 34\'s firmware '
                       'autoselection with <loader secure=...>)' % ovmf)
    changes.append('direct kernel boot: %s, busybox initramfs, cmdline %r'
                   % (kernel, cmdline))
    if not acpi:
        features = domain.find('features')
        features.remove(features.find('acpi'))
        changes.append('<features><acpi/> removed, to show what the guest '
                       'loses without it')
    domain.find('name').text = name
    uuid = domain.find('uuid')
    domain.remove(uuid)
    changes.append('name %s, uuid left to libvirt' % name)
    return Bootable(xml=etree.tostring(domain, encoding='unicode'),
                    name=name, console_log=console_log, changes=changes)


def main() -> None:
    """Print :func:`_capture_in_process`'s result as one JSON line."""
    captured = _capture_in_process()
    sys.stdout.write(json.dumps(dataclasses.asdict(captured)) + '\n')


if __name__ == '__main__':
    main()
