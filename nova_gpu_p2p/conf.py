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

"""The ``[gpu_p2p]`` option group of nova.conf."""

from oslo_config import cfg
from oslo_config import types

from nova_gpu_p2p import conf_types
from nova_gpu_p2p import exception
from nova_gpu_p2p.topology import pci_ids

GROUP = cfg.OptGroup(
    'gpu_p2p',
    title='nova-gpu-p2p options',
    help='NVIDIA GPUDirect P2P cliques, PCIe expander buses and NUMA-correct '
         'device placement for libvirt guests, used by the '
         'gpu_p2p.GPUP2PLibvirtDriver compute driver.')

P2P_LEVELS = (
    ('NV', 'NVLink between the two GPUs'),
    ('PIX', 'at most one PCIe switch between the two GPUs'),
    ('PXB', 'several PCIe switches, but no host bridge'),
    ('PHB', 'through one PCIe host bridge (root complex)'),
    ('NODE', 'across PCIe root complexes within one NUMA node'),
    ('SYS', 'across NUMA nodes (the SMP interconnect between sockets)'),
)


OPTS = [
    cfg.StrOpt(
        'topology_backend',
        default='sysfs',
        help='How the host GPU topology is discovered: the name of a '
             'backend in the nova_gpu_p2p.topology entry point namespace. '
             '"sysfs" reads the PCI tree under sysfs_root and works while '
             'the GPUs are bound to vfio-pci; "static" reads '
             'static_topology_file, written by the operator or captured '
             'on bare metal; "nvml" asks the NVIDIA driver (only when the '
             'GPUs are visible to it) and adds NVLink; "fabricmanager" '
             '(NVIDIA HGX boards with NVSwitch) adds NVLink within the '
             'partitions that NVIDIA Fabric Manager supports.'),
    cfg.Opt(
        'sysfs_root',
        type=conf_types.Path(),
        default='/sys',
        help='Directory that the sysfs backend reads as /sys. Only tests '
             'and offline analysis of a captured host point it elsewhere.'),
    cfg.Opt(
        'static_topology_file',
        type=conf_types.Path(),
        help='File read by the static topology backend. Required when '
             'topology_backend is "static".'),
    cfg.StrOpt(
        'p2p_level',
        default='PXB',
        choices=P2P_LEVELS,
        help='The farthest link at which two GPUs still count as P2P '
             'capable and may share a clique, in nvidia-smi topo -m and '
             'NCCL_P2P_LEVEL terms, nearest first.'),
    cfg.StrOpt(
        'acs_policy',
        default='route',
        choices=(
            ('route', 'ACS P2P Request Redirect or P2P Egress Control '
                      'enabled on a PCIe switch downstream port in a '
                      'pair\'s path sends that pair\'s traffic up through '
                      'the root complex, so the pair counts as PHB at best; '
                      'a port whose ACS could not be read (no privsep) '
                      'counts as Request Redirect on'),
            ('ignore', 'ACS settings, read or unknown, are not considered'),
        ),
        help='How PCIe Access Control Services settings found on the host '
             'change the P2P link class of GPU pairs.'),
    cfg.ListOpt(
        'clique_map',
        default=[],
        item_type=conf_types.CliqueAssignment(),
        help='Operator assertion of the clique ID of individual GPUs, as a '
             'comma separated list of PCI_ADDRESS:CLIQUE_ID, for example '
             '"0000:81:00.0:0,0000:82:00.0:0". Wins over the discovered '
             'topology. Clique IDs are 0 to 15.'),
    cfg.BoolOpt(
        'allow_consumer_gpu_cliques',
        default=False,
        help='Let GeForce and TITAN (consumer) GPUs, and GPUs that nothing '
             'identifies (neither the device, NVML nor the PCI ID '
             'database), share GPUDirect P2P cliques. Off by default: on '
             'consumer cards in a VM the NVIDIA driver accepts the clique '
             'and nvidia-smi topo -p2p r says OK, but '
             'the peer mapping does not reach the peer, so NCCL hangs and '
             'copies return wrong data (NVIDIA/nccl#2335). Turn it on only '
             'after verifying P2P bandwidth and data inside a guest on '
             'these cards and driver. Also lifts the bar on clique_map '
             'entries for such GPUs.'),
    cfg.ListOpt(
        'trusted_gpu_models',
        default=[],
        item_type=conf_types.GpuModelId(),
        help='GPU models the operator vouches are no GeForce or TITAN, as '
             'a comma separated list of vendor:device or '
             'vendor:device:subvendor:subdevice IDs in hex, as lspci -nn '
             'shows them (for example "10de:2bb1" or '
             '"10de:2bb1:10de:204b"). For a GPU that neither NVML nor the '
             'PCI ID database names and that is no 3D controller on an '
             'NVIDIA board (a new workstation card, a data-center card in '
             'display mode): it may then share cliques. Opens no GPU that '
             'is known as a consumer GPU (by NVML\'s brand, its device or '
             'subsystem name, or as a CMP mining card): only '
             'allow_consumer_gpu_cliques does.'),
    cfg.Opt(
        'pci_ids_file',
        type=conf_types.Path(),
        help='The PCI ID database (pci.ids, as lspci reads it) that names '
             'the GPUs, so that consumer GPUs get no clique. A file that '
             'names one NVIDIA device or subsystem twice is refused, as '
             'pciutils refuses it, and GPUs are then judged without names. '
             'Unset: the '
             'first that exists of %s (Debian and Ubuntu: package pci.ids; '
             'RHEL family: hwdata).' % ', '.join(pci_ids.SEARCH_PATHS)),
    cfg.StrOpt(
        'expander_bus_grouping',
        default='root_complex',
        choices=(
            ('root_complex', 'one pcie-expander-bus per host PCIe root '
                             'complex, with that complex\'s NUMA node'),
            ('numa', 'one pcie-expander-bus per host NUMA node'),
        ),
        help='How passthrough devices are grouped onto guest PCIe expander '
             'buses when a flavor sets hw:gpu_numa_affinity.'),
    cfg.ListOpt(
        'align_device_types',
        default=['gpu', 'nic'],
        item_type=types.String(choices=('gpu', 'nic', 'all')),
        help='Which passthrough devices follow their host locality onto '
             'guest expander buses: "gpu" (NVIDIA and other display-class '
             'devices, and the NVSwitch functions of a whole HGX board), '
             '"nic" (network devices, SR-IOV VFs and PFs included), "all" '
             '(every passthrough PCI device).'),
    cfg.BoolOpt(
        'guest_numa_distances',
        default=True,
        help='Copy the host NUMA distances (ACPI SLIT) into the guest NUMA '
             'cells that Nova mapped, so the guest sees which cells are '
             'near each other.'),
    cfg.Opt(
        'pcihole64',
        type=conf_types.PCIHole64(),
        default='auto',
        help='Size of the q35 guest\'s 64-bit PCI hole when devices are '
             'placed under expander buses: "auto" sizes it from the '
             'devices\' 64-bit BARs, within the guest\'s physical address '
             'bits; "off" leaves QEMU\'s default; an integer is a size in '
             'GiB, at most 2097152 (a hole that ends within the 52 '
             'physical address bits QEMU gives a guest), and at least what '
             'the devices\' BARs need, or the build is refused (kept to '
             'Nova\'s layout for hw:gpu_numa_affinity=preferred).'),
    cfg.IntOpt(
        'grace_numa_cells_per_gpu',
        default=8,
        min=1,
        max=64,
        help='On Grace Hopper and Grace Blackwell hosts (GPUs bound to '
             'nvgrace_gpu_vfio_pci), how many CPU-less, memory-less guest '
             'NUMA cells each passed-through GPU gets, tied to it as ACPI '
             'Generic Initiators (libvirt <hostdev><acpi nodeset>); the '
             'NVIDIA guest driver onlines the GPU\'s memory on them. '
             'NVIDIA\'s recipe is eight, one per MIG instance. Needs '
             'hw:gpu_numa_affinity on the flavor, libvirt 11.8 and QEMU '
             '9.0.'),
    cfg.BoolOpt(
        'guest_topology',
        default=True,
        help='Give a guest whose devices are placed on expander buses a '
             'description of their host PCIe topology (switch levels, link '
             'speeds and widths, link classes; no host addresses) as the '
             'QEMU fw_cfg file opt/org.openstack.nova-gpu-p2p/topology, '
             'for the guest agent nova-gpu-p2p-guest to hand to NCCL.'),
    cfg.Opt(
        'clique_fit_weight_multiplier',
        type=conf_types.FiniteFloat(),
        default=10.0,
        help='Read by nova-scheduler. How strongly GPUP2PCliqueFitWeigher '
             'sends a hw:gpu_p2p_clique=required server to the host whose '
             'free GPUs fit it most tightly (fewest left free in the clique '
             'it takes), so large cliques stay whole elsewhere. The weigher '
             'scores 0 to 1 per host; the default outweighs the default '
             'RAM, CPU and disk spreading weighers together. Negative '
             'values prefer the loosest fit. The aggregate metadata key '
             'gpu_p2p_clique_fit_weight_multiplier overrides it per '
             'aggregate.'),
    cfg.Opt(
        'candidates_per_host',
        type=conf_types.AsciiInteger(min=0, max=10000),
        default=2,
        help='Read by nova-scheduler. How many allocation candidates of '
             'each host GPUP2PCliqueFilter hands on to the filters after '
             'it, for every request with GPUs: one per distinct set of '
             'GPUs, best fit first, one of each clique and set of NUMA '
             'nodes in turn. Placement returns '
             'every order of every free set of GPUs (1680 per 8-GPU host '
             'for 4 GPUs) and Nova\'s PciPassthroughFilter and '
             'NUMATopologyFilter cost milliseconds per candidate each, so '
             'this bounds a request\'s filter time by hosts, not by '
             'candidates. The default, 2, is the best fit and a second '
             'on other NUMA nodes (or other devices), for when Nova\'s '
             'NUMA check refuses the first; the second is left out where '
             'Nova would judge it as the first, and where its NUMA check '
             'surely passes the first (no guest NUMA topology; one cell '
             'of dedicated CPUs with room on the GPUs\' node). Measured '
             'at 50 hosts it keeps every host that has a fitting set '
             '(see scheduling-scale in the docs). 0 hands on every '
             'distinct one.'),
    cfg.Opt(
        'spare_hosts',
        type=conf_types.AsciiInteger(min=-1, max=10000),
        default=5,
        help='Read by nova-scheduler. For a hw:gpu_p2p_clique=required '
             'request, GPUP2PCliqueFilter hands Nova\'s filters after it '
             'only the best-fitting hosts: one per server of the request, '
             'plus [scheduler] max_attempts - 1 alternates, plus this many '
             'spare. It runs those filters itself over that many hosts at '
             'a time, best fit first, until enough pass, so a host they '
             'would accept is never the reason for NoValidHost, and '
             'their cost (milliseconds per host) no longer grows with the '
             'cloud. The spares leave Nova\'s weighers a choice among '
             'equally good fits. -1 hands on every host that fits (as '
             'before this option). See scheduling-scale in the docs.'),
    cfg.Opt(
        'fabric_manager_address',
        type=conf_types.FabricManagerAddress(),
        default='127.0.0.1:6666',
        help='Where NVIDIA Fabric Manager listens, for the fabricmanager '
             'topology backend. Fabric Manager (nvidia-fabricmanager) is '
             'the host service that programs the NVSwitches of an HGX '
             'board; in shared NVSwitch virtualization mode (FABRIC_MODE=1 '
             'in its configuration) it activates the partition of GPUs '
             'that one guest gets, which is what gives that guest NVLink. '
             'Either HOST:PORT for TCP (Fabric Manager\'s default is '
             '127.0.0.1:6666; ASCII, at most 255 bytes) or the absolute '
             'path of its Unix socket (at most 107 bytes, the kernel\'s '
             'limit).'),
    cfg.Opt(
        'fabric_manager_library',
        type=conf_types.Path(),
        default='libnvfm.so.1',
        help='The Fabric Manager client library, installed with NVIDIA\'s '
             'Fabric Manager packages, that the fabricmanager backend '
             'loads: a file name found by the dynamic loader, or an '
             'absolute path.'),
    cfg.Opt(
        'module_id_file',
        type=conf_types.Path(),
        default='/var/lib/nova/gpu_p2p_module_ids.json',
        help='Where the fabricmanager backend keeps each GPU\'s HGX module '
             'ID (the number by which Fabric Manager names GPUs). NVML '
             'tells it only while a GPU is bound to the nvidia driver, not '
             'while it is bound to vfio-pci for a guest, so the answers '
             'are kept here; the module IDs are not used from here when '
             'static_topology_file gives module_id per GPU. The board\'s '
             'Fabric Manager partition table is kept here too, so that '
             'nova-compute, even just restarted itself, can tell a '
             'restarted Fabric Manager which partitions run without '
             'asking it.'),
    cfg.BoolOpt(
        'report_traits',
        default=True,
        help='Report the CUSTOM_GPU_P2P* and CUSTOM_GPU_NUMA_AFFINITY '
             'placement traits on the compute node resource provider. When '
             'False, those traits are removed; other traits are never '
             'touched.'),
    cfg.BoolOpt(
        'report_free_traits',
        default=False,
        help='Also report CUSTOM_GPU_P2P_FREE_<n> (n from 2 to 16) while a '
             'hw:gpu_p2p_clique=required server of n GPUs fits on this host '
             '(n free GPUs of one model in one clique; on a Fabric Manager '
             'host a free partition of n), from what its domains hold at '
             'each resource update. Flavors made with "nova-gpu-p2p flavor '
             '--free-trait" require them, so that placement returns only '
             'hosts where the server fits. Each change after a new '
             'allocation on the host costs one placement generation '
             'conflict, which Nova retries at once and logs at ERROR. '
             'Needs report_traits.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A group object of its own: oslo.config keeps each option's overrides
    # in the OptGroup it was given, so sharing GROUP between ConfigOpts
    # (the CLI's, the tests') would share their set_override values too.
    group = cfg.OptGroup(GROUP.name, title=GROUP.title, help=GROUP.help)
    conf.register_group(group)
    conf.register_opts(OPTS, group=group)


def validate(conf: cfg.ConfigOpts) -> None:
    """Read every option now, so a bad value stops nova-compute at start-up.

    oslo.config parses a value only when it is first read; without this a
    typo would surface at the first GPU boot instead. Raises oslo.config's
    InvalidConfig carrying oslo.config's own message, which names the
    option, the file and the allowed values; a ``$`` reference to no
    option, or one that leads back to itself, is named the same way.
    """
    group = conf[GROUP.name]
    for opt in OPTS:
        try:
            getattr(group, opt.dest)
        except ValueError as exc:
            raise exception.InvalidConfig(
                f'[{GROUP.name}] {opt.dest}: {exc}') from exc
        except cfg.Error as exc:  # NoSuchOptError: $name of no option
            raise exception.InvalidConfig(
                f'[{GROUP.name}] {opt.dest}: a $ reference that cannot be '
                f'resolved: {exc}') from exc
        except RecursionError as exc:
            raise exception.InvalidConfig(
                f'[{GROUP.name}] {opt.dest}: its $ references lead back to '
                f'themselves; write the value, or escape a literal $ as '
                f'$$') from exc


def option_default(name: str) -> object:
    """The default of ``[gpu_p2p] name``, for where its value is unusable."""
    return next(opt.default for opt in OPTS if opt.dest == name)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    """oslo-config-generator's hook (``oslo.config.opts`` entry point)."""
    return [(GROUP, OPTS)]
