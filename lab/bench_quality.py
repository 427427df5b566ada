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

"""``tox -e bench``'s decision quality sections: ours and the published
workarounds on every corpus host, each document checked by libvirt first
(:data:`DECISION_QUALITY`), and the NVLink guests get on an HGX board with
Fabric Manager, per strategy (:data:`FABRIC`).
"""

from lab import bench_sizes
from lab import cloud_runner
from lab import decision_quality
from lab import fabric_quality
from nova_gpu_p2p.fabric import partitions
from tests.fixtures import fake_fm
from tests.fixtures import hosts


#: The strategies x five metrics on every corpus host, from the XML.
DECISION_QUALITY = 'decision_quality'
STRATEGY_NOTES = {
    'stock': 'Nova\'s LibvirtDriver, as without this project',
    'wrapper': 'Nova\'s XML; the QEMU wrapper script (lab/baselines/'
               'wrapper.py) rewrites the -device vfio-pci arguments of '
               'libvirt\'s QEMU command line with the map it ships: every '
               'GPU of the host in clique 0',
    'wrapper-best': 'the same script with an operator\'s correct static '
                    'map for the host (its P2P groups at PXB, from the '
                    'hand-written tests/fixtures/expected_cliques.py)',
    'sidecar': 'Nova\'s XML + the KubeVirt sidecar recipe (lab/'
               'baselines/sidecar.py, lxml): one pxb-pcie per host NUMA '
               'node, <node> = the host node number (it assumes guest node '
               'N is host node N), no cliques',
    'ours': 'GPUP2PLibvirtDriver, default [gpu_p2p] options (NCCL: the '
            'guest\'s sysfs alone, no guest agent)',
    'ours+agent': 'the same XML, NCCL reading the topology file the guest '
                  'agent writes from its fw_cfg description',
}
METRIC_TITLES = {
    'p2p_enabled': 'P2P on',
    'p2p_false': 'false P2P',
    'numa_match': 'NUMA match',
    'gpu_nic_bus': 'GPU/NIC bus',
    'nccl_host_class': 'NCCL = host',
}
METRIC_NOTES = {
    'p2p_enabled': 'GPU pairs P2P capable on the host (<= PXB, ACS '
                   'routed) that share a clique in the guest; goal 100%',
    'p2p_false': 'GPU pairs NOT P2P capable that share a clique all the '
                 'same; goal 0%',
    'numa_match': 'passthrough devices whose guest node (<node> of the '
                  'pxb-pcie above them; none on the root bus) is the guest '
                  'cell bound to their host node; goal 100%',
    'gpu_nic_bus': 'GPU/NIC pairs on one host root complex that sit below '
                   'one expander bus in the guest (both on the root bus '
                   'does not count: that bus holds every device)',
    'nccl_host_class': 'GPU-GPU and GPU-NIC pairs that NCCL in the guest '
                       'classifies (PIX/PXB/PHB/SYS, by NCCL\'s rules, '
                       'from the guest sysfs tree the XML implies) as the '
                       'host\'s class (ACS routed; nvidia-smi NODE is '
                       'NCCL\'s PHB); goal 100%',
}


def decision_quality_run() -> list[dict]:
    """Every corpus host, all and half its GPUs, four strategies."""
    records = []
    for name in bench_sizes.SIZES.decision_hosts or hosts.HOSTS:
        records.extend(cloud_runner.run(
            'decision_quality', cloud='bench_cloud.CorpusBenchCloud',
            corpus_host=name))
    return records


def _instance(record: dict) -> str:
    text = '%s %dG' % (record['size'], record['gpus'])
    if record['nics']:
        text += '+%dN' % record['nics']
    if record.get('host_cells') is not None:
        text += ' n%s' % ','.join(map(str, record['host_cells']))
    return text


def _share(metric: dict) -> str:
    return str(decision_quality.Share(metric['hits'], metric['total']))


def _pooled(records: list[dict], crossed: bool | None = None
            ) -> dict[str, dict[str, list[int]]]:
    """Hits and totals per strategy and metric; ``crossed``: only those."""
    totals = {s: {m: [0, 0] for m in decision_quality.METRICS}
              for s in STRATEGY_NOTES}
    for record in records:
        if 'error' in record or (crossed is not None
                                 and record['crossed'] != crossed):
            continue
        for strategy, found in record['strategies'].items():
            for metric, value in found.get('metrics', {}).items():
                totals[strategy][metric][0] += value['hits']
                totals[strategy][metric][1] += value['total']
    return totals


def refusals(records: list[dict]) -> dict[str, list[str]]:
    """Strategy -> '<host> <instance>: <libvirt's reason>' per refusal."""
    found: dict[str, list[str]] = {s: [] for s in STRATEGY_NOTES}
    for record in records:
        for strategy, result in record.get('strategies', {}).items():
            if result['libvirt']['accepted'] is False:
                found[strategy].append('%s %s: %s' % (
                    record['host'], _instance(record),
                    result['libvirt']['reason']))
    return found


def print_decision_quality(records: list[dict]) -> None:
    print('\nDecision quality: each strategy\'s domain XML through libvirt '
          '(virt-xml-validate, virsh domxml-to-native), then parsed back, '
          'with the cliques of QEMU\'s command line, against hosts.EXPECTED '
          'and the host topology; refused XML scores zero')
    unchecked = sorted({r['libvirt'] for r in records
                        if r['libvirt'] != 'checked'})
    for reason in unchecked:
        print('\n  *** UNVALIDATED: libvirt could not check the XML (%s); '
              'the scores below are from the XML alone, and the wrapper, '
              'which needs libvirt\'s QEMU command line, is not scored ***\n'
              % reason)
    header = '%-26s %-22s %-12s' % ('host', 'instance', 'strategy') + ''.join(
        ' %-13s' % METRIC_TITLES[m] for m in decision_quality.METRICS)
    print(header)
    print('-' * len(header))
    for record in records:
        if 'error' in record:
            print('%-26s %-22s boot failed: %s' % (
                record['host'], _instance(record), record['error'][:60]))
            continue
        for strategy, found in record['strategies'].items():
            row = '%-26s %-22s %-12s' % (record['host'], _instance(record),
                                         strategy)
            if 'metrics' not in found:
                print(row + ' not scored: ' + found['not_scored'])
                continue
            row += ''.join(' %-13s' % _share(found['metrics'][m])
                           for m in decision_quality.METRICS)
            if found['libvirt']['accepted'] is False:
                row += ' REFUSED by libvirt'
            print(row)
    print('-' * len(header))
    for title, crossed in (('all instances (pooled)', None),
                           ('crossed only (pooled)', True)):
        for strategy, metrics in _pooled(records, crossed).items():
            print('%-26s %-22s %-12s' % (title, '', strategy)
                  + ''.join(' %-13s' % decision_quality.Share(*metrics[m])
                            for m in decision_quality.METRICS))
    print('\n  XML libvirt refused (scored zero; false P2P n/a):')
    for strategy, found in refusals(records).items():
        print('  %-12s %d of %d' % (strategy + ':', len(found), sum(
            'strategies' in r for r in records)))
        for line in found:
            print('    %s' % line)
    print('\n  instance: all or half of the GPUs Nova is offered, or '
          'crossed (a filler server holds host node 0\'s CPUs, so Nova '
          'fits guest cell 0 on another node: one cell with the second '
          'node\'s devices, or two cells, cell 0 needing two CPUs); G GPUs '
          '+ N NICs, nX,Y: host nodes of its guest cells (hw:numa_nodes = '
          'the host nodes its GPUs need; hw:gpu_p2p_clique=auto, '
          'hw:gpu_numa_affinity=preferred); n/a: nothing to count')
    for metric in decision_quality.METRICS:
        print('  %-12s %s' % (METRIC_TITLES[metric] + ':',
                              METRIC_NOTES[metric]))
    for strategy, note in STRATEGY_NOTES.items():
        print('  %-12s %s' % (strategy + ':', note))
    limits = sorted({(r['host'], limit) for r in records
                     for limit in r.get('limits', ())})
    for host, limit in limits:
        print('  limit of the test double on %s: %s' % (host, limit))
    errors = sorted({(r['host'], found['agent_error'])
                     for r in records for found in r.get(
                         'strategies', {}).values() if 'agent_error' in found})
    for host, error in errors:
        print('  guest agent not run on %s: %s' % (host, error))


FABRIC = 'fabric_nvlink'
FABRIC_CLOUD = 'fabric_bench_cloud.FabricBenchCloud'
FABRIC_TITLES = {'nvlink_pairs': 'NVLink pairs (goal 100%)',
                 'one_partition': 'servers of 2+ on one partition',
                 'cross_tenant': 'cross-tenant NVLink (goal 0%)',
                 'cuda_ready': 'CUDA-ready GPUs (goal 100%)'}


def fabric_nvlink() -> dict:
    """Nova's cloud and ours on the HGX host; each strategy's metrics."""
    sequences = ({'sequences': bench_sizes.SIZES.fabric_sequences}
                 if bench_sizes.SIZES.fabric_sequences else {})
    records = [record for ours in (False, True)
               for record in cloud_runner.run('nvlink', cloud=FABRIC_CLOUD,
                                              OURS=ours, **sequences)]
    board, _ = partitions.to_addresses(
        fake_fm.H100_PARTITIONS.items(), hosts.HGX_MODULES)
    return {'records': records, 'strategies': {
        name: {metric: share.as_dict() for metric, share in found.items()}
        for name, found in fabric_quality.pooled(records, board).items()}}


def print_fabric_nvlink(result: dict) -> None:
    print('\nNVLink on an HGX board (H100, the stand-in Fabric Manager), '
          'hw:gpu_p2p_clique=required servers booted in sequence on the '
          'empty board, then deleted:')
    for record in result['records']:
        print('  %-5s %-12s %s; active after the boots: %s, after the '
              'deletes: %s' % (
                  'ours' if record['ours'] else 'Nova',
                  '+'.join(map(str, record['sequence'])) + ' GPUs',
                  ' | '.join(','.join(a[5:7] for a in gpus)
                             for gpus in record['servers']),
                  record['active'] or 'none',
                  record['active_after_delete'] or 'none'))
    print('  %-28s' % 'strategy' + ''.join(
        ' %-30s' % FABRIC_TITLES[m] for m in fabric_quality.METRICS))
    for name, metrics in result['strategies'].items():
        print('  %-28s' % name + ''.join(
            ' %-30s' % _share(metrics[m]) for m in fabric_quality.METRICS))
    print('  GPUs by PCI bus number; stock, wrapper and sidecar: Nova\'s '
          'scheduler and GPUs, no Fabric Manager call (the wrapper and the '
          'sidecar change only the guest\'s XML or QEMU command line); by '
          'hand and hook: computed on Nova\'s GPUs; ours: our filter\'s '
          'GPUs and the partitions our driver activated, as Fabric Manager '
          'reports them')
