#!/bin/bash
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

# nova-gpu-p2p devstack plugin: installs the package where Nova runs, selects
# the gpu_p2p compute driver and its [gpu_p2p] options, optionally a [pci]
# alias and device_spec (with each GPU's clique), PCI devices in placement,
# the scheduler filters and weigher, and a P2P flavor.
#
# devstack sources this file as `plugin.sh MODE [PHASE]`, with its own
# helpers (iniset, pip_install, ...) and globals (NOVA_CONF, NOVA_BIN_DIR,
# ...) defined, after devstack/settings. Only stack post-config writes
# nova.conf: stack.sh starts the Nova services after that phase, and
# nova-compute's nova-cpu.conf is copied from nova.conf when it starts, so
# nothing needs a restart.

_GPU_P2P_DRIVER=gpu_p2p.GPUP2PLibvirtDriver
# What devstack's lib/nova_plugins/hypervisor-libvirt sets; clean restores it.
_GPU_P2P_LIBVIRT_DRIVER=libvirt.LibvirtDriver
# The [gpu_p2p] options (nova_gpu_p2p/conf.py); GPU_P2P_<OPTION> sets one.
# nova-compute reads these, on n-cpu hosts:
_GPU_P2P_COMPUTE_OPTIONS="topology_backend sysfs_root static_topology_file
p2p_level acs_policy clique_map expander_bus_grouping align_device_types
guest_numa_distances pcihole64 guest_topology report_traits report_free_traits
fabric_manager_address fabric_manager_library module_id_file
allow_consumer_gpu_cliques trusted_gpu_models pci_ids_file
grace_numa_cells_per_gpu"
# and nova-scheduler these, on n-sch hosts (a controller without n-cpu too):
_GPU_P2P_SCHEDULER_OPTIONS="clique_fit_weight_multiplier candidates_per_host
spare_hosts"
_GPU_P2P_CLIQUE_FILTER=nova_gpu_p2p.scheduler.GPUP2PCliqueFilter
_GPU_P2P_WEIGHER=nova_gpu_p2p.scheduler.GPUP2PCliqueFitWeigher
# Ours first: it trims the allocation candidates that Nova's two check one
# by one (doc/source/scheduling-scale.rst).
_GPU_P2P_FILTER=GPUP2PCliqueFilter
_GPU_P2P_NOVA_CANDIDATE_FILTERS="PciPassthroughFilter NUMATopologyFilter"
# Nova's own [filter_scheduler] defaults, for a nova.conf that sets none
# (devstack's always sets enabled_filters, never the other two).
_GPU_P2P_NOVA_FILTERS=ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter
_GPU_P2P_NOVA_AVAILABLE_FILTERS=nova.scheduler.filters.all_filters
_GPU_P2P_NOVA_WEIGHERS=nova.scheduler.weights.all_weighers
# The nvml extra of setup.cfg, installed with the nvml topology backend and
# the fabricmanager one (which reads GPU module IDs through NVML).
_GPU_P2P_NVML_REQUIREMENT="nvidia-ml-py>=12.535.0"

# Stop before anything is installed when the settings cannot work.
function check_nova_gpu_p2p_settings {
    if is_service_enabled n-cpu && [[ "${VIRT_DRIVER:-libvirt}" != libvirt ]]; then
        die $LINENO "nova-gpu-p2p is a libvirt driver: VIRT_DRIVER=${VIRT_DRIVER} does not work with it"
    fi
    if [[ -n "$GPU_P2P_FLAVOR_GPUS" && -z "$GPU_P2P_ALIAS" ]]; then
        die $LINENO "GPU_P2P_FLAVOR_GPUS needs GPU_P2P_ALIAS, the [pci] alias the flavor asks for"
    fi
    if [[ -n "$GPU_P2P_ALIAS" ]]; then
        if [[ ! "$GPU_P2P_ALIAS" =~ ^[A-Za-z0-9._-]+$ ]]; then
            die $LINENO "GPU_P2P_ALIAS=$GPU_P2P_ALIAS: use letters, digits, '.', '_' and '-'"
        fi
        if [[ ! "$GPU_P2P_VENDOR_ID" =~ ^[0-9a-fA-F]{4}$ ]]; then
            die $LINENO "GPU_P2P_VENDOR_ID=$GPU_P2P_VENDOR_ID: give 4 hex digits, e.g. 10de (lspci -nn)"
        fi
        if [[ ! "$GPU_P2P_PRODUCT_ID" =~ ^[0-9a-fA-F]{4}$ ]]; then
            die $LINENO "GPU_P2P_ALIAS needs GPU_P2P_PRODUCT_ID, the GPUs' 4 hex digit PCI device ID (lspci -nn shows [${GPU_P2P_VENDOR_ID}:XXXX])"
        fi
        if [[ ! "$GPU_P2P_DEVICE_TYPE" =~ ^type-(PCI|PF|VF)$ ]]; then
            die $LINENO "GPU_P2P_DEVICE_TYPE=$GPU_P2P_DEVICE_TYPE: type-PCI, type-PF or type-VF"
        fi
    fi
    local var
    for var in GPU_P2P_FLAVOR_GPUS GPU_P2P_FLAVOR_NUMA_NODES \
            GPU_P2P_FLAVOR_VCPUS GPU_P2P_FLAVOR_RAM GPU_P2P_FLAVOR_DISK \
            GPU_P2P_PLACEMENT_CAP; do
        # No leading zero: "00" is not 0 to the plugin's tests, and Nova
        # refuses max_placement_results = 00 (its minimum is 1).
        if [[ -n "${!var}" && ! "${!var}" =~ ^(0|[1-9][0-9]*)$ ]]; then
            die $LINENO "$var=${!var}: give a whole number, without leading zeros"
        fi
    done
    _gpu_p2p_check_local_conf_pci
}

# The plugin's [pci] lines and local.conf's [[post-config|$NOVA_CONF]]
# [pci] cannot both be kept: stack.sh merges local.conf after the plugin's
# post-config with iniset, which rewrites every line of a multi valued
# option (one device_spec line there becomes as many copies of it as the
# plugin wrote lines), or inidelete and iniadd_literal, which drop them.
# A section's file name is judged as stack.sh's merge_config_group reads
# it: evaluated ($NOVA_CONF, ${NOVA_CONF}, /etc/nova/nova.conf alike),
# then compared as a path with the files nova reads.
function _gpu_p2p_check_local_conf_pci {
    local local_conf=${TOP_DIR:-}/local.conf
    local name real target option setting
    if [[ -z "$GPU_P2P_ALIAS" || -z "${TOP_DIR:-}" || ! -r "$local_conf" ]]; then
        return 0
    fi
    # Split and evaluated as merge_config_group splits and evaluates them.
    # shellcheck disable=SC2207
    local -a names=($(get_meta_section_files "$local_conf" post-config))
    for name in "${names[@]}"; do
        real=$(set +u; eval "echo $name" 2>/dev/null) || continue
        [[ -n "$real" ]] || continue
        real=$(realpath -m -- "$real")
        for target in "$NOVA_CONF" "${NOVA_CPU_CONF:-}"; do
            [[ -n "$target" && "$real" == "$(realpath -m -- "$target")" ]] && break
            target=""
        done
        [[ -n "$target" ]] || continue
        for option in device_spec passthrough_whitelist alias; do
            setting=GPU_P2P_PCI_DEVICE_SPECS
            if [[ $option == alias ]]; then
                setting=GPU_P2P_PCI_ALIASES
                is_service_enabled n-api n-cpu || continue
            else
                is_service_enabled n-cpu || continue
            fi
            if get_meta_section "$local_conf" post-config "$name" |
                    awk -v option="$option" '
                        /^\[.*\]/ { in_pci = ($0 ~ /^\[pci\]/) ; next }
                        in_pci && $0 ~ "^" option "[ \t]*=" { found = 1 }
                        END { exit !found }'; then
                die $LINENO "local.conf's [[post-config|$name]] sets [pci] $option: devstack merges it after the plugin and it replaces every [pci] $option line the plugin writes for GPU_P2P_ALIAS=$GPU_P2P_ALIAS (the GPUs' clique lines): give its values in $setting instead, one per line, and the plugin writes them beside its own"
            fi
        done
    done
}

function install_nova_gpu_p2p {
    # Into Nova's environment (pip_install picks devstack's venv when Nova
    # is in one). Not setup_develop: an editable install of
    # nova/virt/gpu_p2p.py could shadow Nova's own package; a plain install
    # adds only that module. --no-deps: everything the package imports
    # comes with Nova, and resolving its "nova" requirement could replace
    # the Nova that devstack installed from git with one from PyPI. The
    # guest agent's distribution first: the driver requires it (it is not
    # on PyPI; doc/source/install.rst, "The guest agent").
    pip_install --no-deps "$GPU_P2P_DIR/guest-agent"
    pip_install --no-deps "$GPU_P2P_DIR"
    if [[ "$GPU_P2P_TOPOLOGY_BACKEND" == nvml ||
          "$GPU_P2P_TOPOLOGY_BACKEND" == fabricmanager ]]; then
        pip_install "$_GPU_P2P_NVML_REQUIREMENT"
    fi
    _gpu_p2p_move_shim_into_nova
    # Stop here, not at "nova-api did not start", if Nova cannot load us.
    "$PYTHON" -c 'import nova.cmd.compute, nova.virt.gpu_p2p' ||
        die $LINENO "Nova's Python ($PYTHON) cannot import nova.cmd.compute and nova.virt.gpu_p2p after installing nova-gpu-p2p (the error is above)"
}

# The driver shim as Nova's own checkout ($NOVA_DIR, installed editable by
# setup_develop) must hold it.
function _gpu_p2p_nova_shim {
    echo "$NOVA_DIR/nova/virt/gpu_p2p.py"
}

# devstack installs Nova editable: its package is $NOVA_DIR/nova, found
# through setuptools' editable finder or a .pth line, after site-packages.
# The shim pip_install wrote, site-packages/nova/virt/gpu_p2p.py, sits in a
# nova/ with no __init__.py there, which Python then takes for the whole of
# a namespace package nova: Nova stops importing. So the shim moves into
# Nova's checkout as a link to ours, and nothing of ours stays under
# site-packages/nova/. (A Nova installed from a wheel has its own
# site-packages/nova/, where the shim can stay.)
function _gpu_p2p_move_shim_into_nova {
    local installed dir sudo=""
    if [[ ! -f "$NOVA_DIR/nova/virt/__init__.py" ]]; then
        return 0
    fi
    ln -sfn "$GPU_P2P_DIR/nova/virt/gpu_p2p.py" "$(_gpu_p2p_nova_shim)"
    installed=$("$PYTHON" -c 'import importlib.metadata as m, sys
print(m.distribution(sys.argv[1]).locate_file(sys.argv[2]))' \
        nova-gpu-p2p nova/virt/gpu_p2p.py)
    dir=$(dirname "$installed")
    if [[ ! -f "$installed" || -f "$dir/__init__.py" ]]; then
        # No shim there, or Nova's own package: nothing to take back.
        return 0
    fi
    if [[ ! -w "$dir" ]]; then
        # The system's site-packages (GLOBAL_VENV=False): pip_install ran
        # pip with sudo.
        sudo=sudo
    fi
    $sudo rm -f "$installed" "$dir"/__pycache__/gpu_p2p.*.pyc
    # The directories pip made for the shim alone; rmdir leaves any other.
    $sudo rmdir "$dir/__pycache__" "$dir" "$(dirname "$dir")" 2>/dev/null || true
}

# stack.sh runs configure_neutron_nova in the background while the
# post-config phase runs; its iniset calls on nova.conf and ours race (each
# rewrites the whole file), as stack.sh's own comment before
# "async_wait configure_neutron_nova" says. Wait for that job to record its
# end (without collecting it: stack.sh does that later).
function _gpu_p2p_wait_for_nova_conf_writers {
    local job=${DEST}/async/configure_neutron_nova.ini
    local pid i
    if [[ ! -f "$job" ]]; then
        return 0
    fi
    pid=$(iniget "$job" job pid)
    if [[ -z "$pid" || "$pid" == self ]]; then
        return 0
    fi
    for ((i = 0; i < 600; i++)); do
        if [[ -n "$(iniget "$job" job end_time)" ]]; then
            return 0
        fi
        sleep 0.5
    done
    warn $LINENO "configure_neutron_nova still runs after 300 s; writing nova.conf anyway"
}

# Whether [SECTION] of FILE has exactly the line LINE.
function _gpu_p2p_ini_has_line {
    local file=$1 section=$2 line=$3
    # LINE through the environment: awk -v would take its backslashes as
    # escapes.
    _GPU_P2P_LINE=$line awk -v header="[$section]" '
        /^\[.*\]/ { in_section = (index($0, header) == 1); next }
        in_section && $0 == ENVIRON["_GPU_P2P_LINE"] { found = 1 }
        END { exit !found }' "$file"
}

# Remove from FILE the lines of [SECTION] equal to LINE or, with no LINE,
# the whole section. devstack's inidelete removes every value of a multi
# valued option ([pci] alias), and it has no helper to drop a section.
function _gpu_p2p_ini_remove {
    local file=$1 section=$2 line=${3:-}
    local tmp
    tmp=$(mktemp)
    _GPU_P2P_LINE=$line awk -v header="[$section]" '
        BEGIN { line = ENVIRON["_GPU_P2P_LINE"] }
        /^\[.*\]/ { in_section = (index($0, header) == 1) }
        in_section && (line == "" || $0 == line) { next }
        { print }' "$file" >"$tmp"
    # Rewrite in place, keeping the file's owner and mode.
    cat "$tmp" >"$file"
    rm -f "$tmp"
}

# Insert LINE, byte for byte, right after the [SECTION] header of FILE
# (which has one), as devstack's iniadd_literal places a value: that uses
# sed's a command, which takes backslashes in LINE as escapes.
function _gpu_p2p_ini_insert {
    local file=$1 section=$2 line=$3
    local tmp
    tmp=$(mktemp)
    _GPU_P2P_LINE=$line awk -v header="[$section]" '
        { print }
        !done && index($0, header) == 1 { print ENVIRON["_GPU_P2P_LINE"]; done = 1 }' \
        "$file" >"$tmp"
    # Rewrite in place, keeping the file's owner and mode.
    cat "$tmp" >"$file"
    rm -f "$tmp"
}

# Add VALUE to the multi valued OPTION of [SECTION], keeping the values
# already there (other plugins', local.conf's).
function _gpu_p2p_ini_add {
    local file=$1 section=$2 option=$3 value=$4
    if _gpu_p2p_ini_has_line "$file" "$section" "$option = $value"; then
        return 0
    fi
    if ini_has_option "$file" "$section" "$option"; then
        _gpu_p2p_ini_insert "$file" "$section" "$option = $value"
    else
        iniset "$file" "$section" "$option" "$value"
    fi
}

# The [pci] alias and device_spec values: one line of JSON without spaces,
# which devstack's iniset would squeeze.
function _gpu_p2p_pci_alias {
    printf '{"name":"%s","vendor_id":"%s","product_id":"%s","device_type":"%s"}' \
        "$GPU_P2P_ALIAS" "${GPU_P2P_VENDOR_ID,,}" "${GPU_P2P_PRODUCT_ID,,}" \
        "$GPU_P2P_DEVICE_TYPE"
}

function _gpu_p2p_pci_device_spec {
    printf '{"vendor_id":"%s","product_id":"%s"}' \
        "${GPU_P2P_VENDOR_ID,,}" "${GPU_P2P_PRODUCT_ID,,}"
}

# The GPUs' [pci] device_spec lines with their clique trait and tag, as
# nova-gpu-p2p topology --device-spec prints them for this host. As root,
# as nova-compute's privsep reads it: ACS settings need CAP_SYS_ADMIN.
function _gpu_p2p_clique_device_specs {
    sudo "$NOVA_BIN_DIR/nova-gpu-p2p" topology --device-spec \
        --config-file "$NOVA_CONF"
}

# Remove from FILE the [pci] device_spec lines that carry a GPU's clique:
# the gpu_p2p_clique tag is ours alone.
function _gpu_p2p_remove_clique_device_specs {
    local file=$1
    local tmp
    tmp=$(mktemp)
    awk '
        /^\[.*\]/ { in_section = (index($0, "[pci]") == 1) }
        in_section && /^device_spec[ \t]*=/ && /"gpu_p2p_clique"/ { next }
        { print }' "$file" >"$tmp"
    cat "$tmp" >"$file"
    rm -f "$tmp"
}

# Add ITEMS to the comma separated list OPTION of [SECTION], starting from
# NOVA_DEFAULT when nova.conf has none.
function _gpu_p2p_list_add {
    local file=$1 section=$2 option=$3 nova_default=$4
    shift 4
    local value item
    value=$(iniget "$file" "$section" "$option")
    value=${value// /}
    value=${value:-$nova_default}
    for item in "$@"; do
        if [[ ",$value," != *",$item,"* ]]; then
            value=$value,$item
        fi
    done
    iniset "$file" "$section" "$option" "$value"
}

# Remove ITEMS from that list; the option goes where nothing is left but
# NOVA_DEFAULT, which then applies as before stack.
function _gpu_p2p_list_remove {
    local file=$1 section=$2 option=$3 nova_default=$4
    shift 4
    local value item kept=""
    value=$(iniget "$file" "$section" "$option")
    if [[ -z "$value" ]]; then
        return 0
    fi
    local -a names
    IFS=, read -r -a names <<<"${value// /}"
    for item in "${names[@]}"; do
        if [[ " $* " != *" $item "* ]]; then
            kept=${kept:+$kept,}$item
        fi
    done
    if [[ -n "$kept" && "$kept" != "$nova_default" ]]; then
        iniset "$file" "$section" "$option" "$kept"
    else
        inidelete "$file" "$section" "$option"
    fi
}

# enabled_filters with ours and Nova's PciPassthroughFilter and
# NUMATopologyFilter in it, ours before both: where another plugin or
# local.conf listed them already, ours goes right before the first of them;
# otherwise all three go last. Every other filter keeps its place.
function _gpu_p2p_add_filters {
    local file=$1
    local value name
    local -a names kept=()
    value=$(iniget "$file" filter_scheduler enabled_filters)
    value=${value// /}
    value=${value:-$_GPU_P2P_NOVA_FILTERS}
    IFS=, read -r -a names <<<"$value"
    for name in "${names[@]}"; do
        if [[ "$name" != "$_GPU_P2P_FILTER" ]]; then
            kept+=("$name")
        fi
    done
    value=""
    local placed=""
    for name in "${kept[@]}"; do
        if [[ -z "$placed" && " $_GPU_P2P_NOVA_CANDIDATE_FILTERS " == *" $name "* ]]; then
            value=${value:+$value,}$_GPU_P2P_FILTER
            placed=1
        fi
        value=${value:+$value,}$name
    done
    if [[ -z "$placed" ]]; then
        value=${value:+$value,}$_GPU_P2P_FILTER
    fi
    for name in $_GPU_P2P_NOVA_CANDIDATE_FILTERS; do
        if [[ ",$value," != *",$name,"* ]]; then
            value=$value,$name
        fi
    done
    iniset "$file" filter_scheduler enabled_filters "$value"
}

# The filters and the weigher. available_filters is multi valued: a value
# of ours alone would replace Nova's default, so that is written too.
function _gpu_p2p_add_scheduler_classes {
    local file=$1
    _gpu_p2p_add_filters "$file"
    if ! ini_has_option "$file" filter_scheduler available_filters; then
        iniset "$file" filter_scheduler available_filters \
            "$_GPU_P2P_NOVA_AVAILABLE_FILTERS"
    fi
    _gpu_p2p_ini_add "$file" filter_scheduler available_filters \
        "$_GPU_P2P_CLIQUE_FILTER"
    _gpu_p2p_list_add "$file" filter_scheduler weight_classes \
        "$_GPU_P2P_NOVA_WEIGHERS" "$_GPU_P2P_WEIGHER"
}

function _gpu_p2p_remove_scheduler_classes {
    local file=$1
    # shellcheck disable=SC2086
    _gpu_p2p_list_remove "$file" filter_scheduler enabled_filters \
        "$_GPU_P2P_NOVA_FILTERS" "$_GPU_P2P_FILTER" \
        $_GPU_P2P_NOVA_CANDIDATE_FILTERS
    _gpu_p2p_ini_remove "$file" filter_scheduler \
        "available_filters = $_GPU_P2P_CLIQUE_FILTER"
    if [[ "$(iniget_multiline "$file" filter_scheduler available_filters)" == \
            "$_GPU_P2P_NOVA_AVAILABLE_FILTERS" ]]; then
        inidelete "$file" filter_scheduler available_filters
    fi
    _gpu_p2p_list_remove "$file" filter_scheduler weight_classes \
        "$_GPU_P2P_NOVA_WEIGHERS" "$_GPU_P2P_WEIGHER"
}

# Whether placement's candidates are capped as scheduling-scale.rst
# recommends: with GPUs in placement and our filter, which builds a fitting
# candidate from any one placement returns.
function _gpu_p2p_caps_placement {
    [[ "$GPU_P2P_PCI_IN_PLACEMENT" == True &&
       "$GPU_P2P_SCHEDULER_FILTERS" == True &&
       "$GPU_P2P_PLACEMENT_CAP" != 0 ]]
}

# Placement's cap and Nova's limit: GPU_P2P_PLACEMENT_CAP candidates per
# request, shared breadth-first between hosts.
function _gpu_p2p_set_placement_cap {
    if is_service_enabled n-sch; then
        iniset "$NOVA_CONF" scheduler max_placement_results "$GPU_P2P_PLACEMENT_CAP"
    fi
    if is_service_enabled placement-api; then
        iniset "$PLACEMENT_CONF" placement max_allocation_candidates "$GPU_P2P_PLACEMENT_CAP"
        iniset "$PLACEMENT_CONF" placement allocation_candidates_generation_strategy breadth-first
        iniset "$PLACEMENT_CONF" workarounds optimize_for_wide_provider_trees True
    fi
}

# Drop OPTION of [SECTION] where it still has the VALUE that stack set.
function _gpu_p2p_remove_value {
    local file=$1 section=$2 option=$3 value=$4
    if [[ -f "$file" && "$(iniget "$file" "$section" "$option")" == "$value" ]]; then
        inidelete "$file" "$section" "$option"
    fi
}

function configure_nova_gpu_p2p {
    _gpu_p2p_wait_for_nova_conf_writers
    if is_service_enabled n-cpu; then
        iniset "$NOVA_CONF" DEFAULT compute_driver "$_GPU_P2P_DRIVER"
        _gpu_p2p_set_options "$_GPU_P2P_COMPUTE_OPTIONS"
        if [[ -n "$GPU_P2P_CPU_DEDICATED_SET" ]]; then
            iniset "$NOVA_CONF" compute cpu_dedicated_set "$GPU_P2P_CPU_DEDICATED_SET"
        fi
    fi
    if is_service_enabled n-sch; then
        _gpu_p2p_set_options "$_GPU_P2P_SCHEDULER_OPTIONS"
    fi
    if [[ -n "$GPU_P2P_ALIAS" ]]; then
        # nova-api turns the flavor's alias into a PCI request and
        # nova-compute claims devices for it; only nova-compute offers them.
        if is_service_enabled n-api n-cpu; then
            _gpu_p2p_ini_add "$NOVA_CONF" pci alias "$(_gpu_p2p_pci_alias)"
            _gpu_p2p_ini_add_lines "$NOVA_CONF" pci alias "$GPU_P2P_PCI_ALIASES"
        fi
        if is_service_enabled n-cpu; then
            _gpu_p2p_ini_add "$NOVA_CONF" pci device_spec "$(_gpu_p2p_pci_device_spec)"
            _gpu_p2p_ini_add_lines "$NOVA_CONF" pci device_spec "$GPU_P2P_PCI_DEVICE_SPECS"
        fi
    fi
    if is_service_enabled n-cpu; then
        # nova-gpu-p2p topology reads the [gpu_p2p] group as nova-compute
        # will: a value it would refuse stops stack.sh here.
        _gpu_p2p_add_clique_device_specs
    fi
    if [[ "$GPU_P2P_PCI_IN_PLACEMENT" == True ]]; then
        if is_service_enabled n-cpu; then
            iniset "$NOVA_CONF" pci report_in_placement True
        fi
        local conf
        for conf in $(_gpu_p2p_pci_in_placement_confs); do
            iniset "$conf" filter_scheduler pci_in_placement True
        done
    fi
    if is_service_enabled n-sch && [[ "$GPU_P2P_SCHEDULER_FILTERS" == True ]]; then
        _gpu_p2p_add_scheduler_classes "$NOVA_CONF"
    fi
    if _gpu_p2p_caps_placement; then
        _gpu_p2p_set_placement_cap
    fi
    if is_service_enabled n-api && [[ -n "$GPU_P2P_FLAVOR_GPUS" ]]; then
        # Refuse bad flavor settings now, before the services start.
        _gpu_p2p_flavor_commands >/dev/null ||
            die $LINENO "nova-gpu-p2p flavor refused the GPU_P2P_FLAVOR_* settings (its message is above)"
    fi
}

# The [gpu_p2p] OPTIONS (space separated) that have a GPU_P2P_ setting.
function _gpu_p2p_set_options {
    local option var
    for option in $1; do
        var=GPU_P2P_${option^^}
        if [[ -n "${!var}" ]]; then
            iniset "$NOVA_CONF" gpu_p2p "$option" "${!var}"
        fi
    done
}

# Add each line of LINES (newline separated) as a value of the multi valued
# OPTION, after the plugin's own value made the section, as it is: iniset
# would squeeze and glob it, iniadd_literal (sed's a command) would drop
# its backslashes.
function _gpu_p2p_ini_add_lines {
    local file=$1 section=$2 option=$3 lines=$4
    local line
    while IFS= read -r line; do
        if [[ -n "${line// /}" ]] &&
                ! _gpu_p2p_ini_has_line "$file" "$section" "$option = $line"; then
            _gpu_p2p_ini_insert "$file" "$section" "$option = $line"
        fi
    done <<<"$lines"
}

# The files of this host's services that read [filter_scheduler]
# pci_in_placement: nova-api, nova-scheduler and every conductor. In
# devstack's default superconductor layout each cell's conductor reads
# only its nova_cellN.conf, which n-cond hosts get.
function _gpu_p2p_pci_in_placement_confs {
    local i
    if is_service_enabled n-api n-sch n-cond n-super-cond; then
        echo "$NOVA_CONF"
    fi
    if [[ "${CELLSV2_SETUP:-superconductor}" == singleconductor ]]; then
        return 0
    fi
    for ((i = 1; i <= ${NOVA_NUM_CELLS:-1}; i++)); do
        if is_service_enabled n-cond "n-cond-cell$i"; then
            conductor_conf "$i"
        fi
    done
}

# Each GPU's own device_spec line, ahead of the line for the whole model
# (Nova uses the first entry that matches): the GPU's placement provider
# gets its clique trait, and nova-scheduler reads the clique from the tag.
# Those of an earlier stack are removed first: the topology may have
# changed since.
function _gpu_p2p_add_clique_device_specs {
    local lines line
    lines=$(_gpu_p2p_clique_device_specs) ||
        die $LINENO "nova-gpu-p2p topology refused the [gpu_p2p] settings in $NOVA_CONF or could not read this host's GPUs (its message is above): fix the GPU_P2P_* setting it names"
    if [[ -z "$GPU_P2P_ALIAS" ]]; then
        return 0
    fi
    _gpu_p2p_remove_clique_device_specs "$NOVA_CONF"
    # Each line goes right after [pci]: the last first keeps their order.
    while IFS= read -r line; do
        if [[ -n "$line" ]]; then
            _gpu_p2p_ini_insert "$NOVA_CONF" pci "$line"
        fi
    done < <(tac <<<"$lines")
}

function _gpu_p2p_flavor_name {
    echo "${GPU_P2P_FLAVOR_NAME:-gpu-p2p.${GPU_P2P_FLAVOR_GPUS}x}"
}

# The openstack commands for the flavor, from the package's own CLI.
function _gpu_p2p_flavor_commands {
    local -a args=(flavor --gpus "$GPU_P2P_FLAVOR_GPUS"
        --alias "$GPU_P2P_ALIAS" --numa-nodes "$GPU_P2P_FLAVOR_NUMA_NODES"
        --name "$(_gpu_p2p_flavor_name)")
    if [[ -n "$GPU_P2P_FLAVOR_VCPUS" ]]; then
        args+=(--vcpus "$GPU_P2P_FLAVOR_VCPUS")
    fi
    if [[ -n "$GPU_P2P_FLAVOR_RAM" ]]; then
        args+=(--ram "$GPU_P2P_FLAVOR_RAM")
    fi
    if [[ -n "$GPU_P2P_FLAVOR_DISK" ]]; then
        args+=(--disk "$GPU_P2P_FLAVOR_DISK")
    fi
    "$NOVA_BIN_DIR/nova-gpu-p2p" "${args[@]}"
}

function create_nova_gpu_p2p_flavor {
    local name commands
    name=$(_gpu_p2p_flavor_name)
    if openstack flavor show "$name" >/dev/null 2>&1; then
        echo "nova-gpu-p2p: flavor $name exists, leaving it as it is"
        return 0
    fi
    commands=$(_gpu_p2p_flavor_commands) ||
        die $LINENO "nova-gpu-p2p flavor refused the GPU_P2P_FLAVOR_* settings (its message is above)"
    echo "$commands"
    # The lines include comments (what the image needs): run them as a script.
    bash -o errexit -c "$commands" || die $LINENO "creating flavor $name failed"
}

function cleanup_nova_gpu_p2p {
    local conf line
    for conf in "$NOVA_CONF" "${NOVA_CPU_CONF:-}"; do
        if [[ ! -f "$conf" ]]; then
            continue
        fi
        if [[ "$(iniget "$conf" DEFAULT compute_driver)" == "$_GPU_P2P_DRIVER" ]]; then
            iniset "$conf" DEFAULT compute_driver "$_GPU_P2P_LIBVIRT_DRIVER"
        fi
        _gpu_p2p_ini_remove "$conf" gpu_p2p
        if [[ -n "$GPU_P2P_ALIAS" ]]; then
            _gpu_p2p_ini_remove "$conf" pci "alias = $(_gpu_p2p_pci_alias)"
            _gpu_p2p_ini_remove "$conf" pci "device_spec = $(_gpu_p2p_pci_device_spec)"
            _gpu_p2p_remove_clique_device_specs "$conf"
            while IFS= read -r line; do
                _gpu_p2p_ini_remove "$conf" pci "alias = $line"
            done <<<"$GPU_P2P_PCI_ALIASES"
            while IFS= read -r line; do
                _gpu_p2p_ini_remove "$conf" pci "device_spec = $line"
            done <<<"$GPU_P2P_PCI_DEVICE_SPECS"
        fi
        if [[ "$GPU_P2P_PCI_IN_PLACEMENT" == True ]]; then
            _gpu_p2p_remove_value "$conf" pci report_in_placement True
        fi
        if [[ -n "$GPU_P2P_CPU_DEDICATED_SET" &&
                "$(iniget "$conf" compute cpu_dedicated_set)" == "$GPU_P2P_CPU_DEDICATED_SET" ]]; then
            inidelete "$conf" compute cpu_dedicated_set
        fi
        if [[ "$GPU_P2P_SCHEDULER_FILTERS" == True ]]; then
            _gpu_p2p_remove_scheduler_classes "$conf"
        fi
        if _gpu_p2p_caps_placement; then
            _gpu_p2p_remove_value "$conf" scheduler max_placement_results "$GPU_P2P_PLACEMENT_CAP"
        fi
    done
    if [[ "$GPU_P2P_PCI_IN_PLACEMENT" == True ]]; then
        for conf in "$NOVA_CONF" "${NOVA_CPU_CONF:-}" $(_gpu_p2p_pci_in_placement_confs); do
            _gpu_p2p_remove_value "$conf" filter_scheduler pci_in_placement True
        done
    fi
    if _gpu_p2p_caps_placement; then
        _gpu_p2p_remove_value "${PLACEMENT_CONF:-}" placement max_allocation_candidates "$GPU_P2P_PLACEMENT_CAP"
        _gpu_p2p_remove_value "${PLACEMENT_CONF:-}" placement allocation_candidates_generation_strategy breadth-first
        _gpu_p2p_remove_value "${PLACEMENT_CONF:-}" workarounds optimize_for_wide_provider_trees True
    fi
    # The sections stack made for its options alone go with them.
    for conf in "$NOVA_CONF" "${NOVA_CPU_CONF:-}" $(_gpu_p2p_pci_in_placement_confs) "${PLACEMENT_CONF:-}"; do
        _gpu_p2p_remove_empty_sections "$conf" pci compute scheduler filter_scheduler placement workarounds
    done
    if [[ -L "$(_gpu_p2p_nova_shim)" &&
            "$(readlink "$(_gpu_p2p_nova_shim)")" == "$GPU_P2P_DIR/nova/virt/gpu_p2p.py" ]]; then
        rm -f "$(_gpu_p2p_nova_shim)"
    fi
    # pip_uninstall takes one name, and ignores devstack's global venv
    # (GLOBAL_VENV), where pip_install put the package: point it there.
    local name
    for name in nova-gpu-p2p nova-gpu-p2p-guest; do
        if [[ "${GLOBAL_VENV:-}" == True && -d "${DEVSTACK_VENV:-}" ]]; then
            PIP_VIRTUAL_ENV=$DEVSTACK_VENV pip_uninstall "$name"
        else
            pip_uninstall "$name"
        fi
    done
}

# Remove from FILE each of the SECTIONS that holds no line but blank ones,
# with the blank line before its header that iniset wrote with it.
function _gpu_p2p_remove_empty_sections {
    local file=$1
    shift
    local tmp
    if [[ ! -f "$file" ]]; then
        return 0
    fi
    tmp=$(mktemp)
    awk -v names=" $* " '
        { line[n++] = $0 }
        END {
            for (i = 0; i < n; i++) {
                if (line[i] ~ /^\[[^]]*\]$/ &&
                        index(names, " " substr(line[i], 2, length(line[i]) - 2) " ")) {
                    j = i + 1
                    while (j < n && line[j] ~ /^[ \t]*$/) j++
                    if (j == n || line[j] ~ /^\[/) {
                        if (kept > 0 && out[kept - 1] == "") kept--
                        continue
                    }
                }
                out[kept++] = line[i]
            }
            for (i = 0; i < kept; i++) print out[i]
        }' "$file" >"$tmp"
    cat "$tmp" >"$file"
    rm -f "$tmp"
}

# Every service whose configuration the plugin writes: nova-compute,
# nova-api, nova-scheduler, the conductors (n-cond, or devstack's
# superconductor and cell conductors) and placement.
function _gpu_p2p_services {
    local i
    echo n-cpu n-api n-sch n-cond n-super-cond placement-api
    for ((i = 1; i <= ${NOVA_NUM_CELLS:-1}; i++)); do
        echo "n-cond-cell$i"
    done
}

# shellcheck disable=SC2046
if is_service_enabled $(_gpu_p2p_services); then
    if [[ "${1:-}" == stack ]]; then
        case "${2:-}" in
            pre-install)
                check_nova_gpu_p2p_settings
                ;;
            install)
                # Only where Nova loads the package: the driver, the
                # flavor validators, the scheduler classes.
                if is_service_enabled n-cpu n-api n-sch; then
                    echo_summary "Installing nova-gpu-p2p"
                    install_nova_gpu_p2p
                fi
                ;;
            post-config)
                echo_summary "Configuring nova-gpu-p2p"
                check_nova_gpu_p2p_settings
                configure_nova_gpu_p2p
                ;;
            extra)
                # The flavor needs nova-api, which runs from here on.
                if is_service_enabled n-api && [[ -n "$GPU_P2P_FLAVOR_GPUS" ]]; then
                    echo_summary "Creating the nova-gpu-p2p flavor"
                    create_nova_gpu_p2p_flavor
                fi
                ;;
            test-config)
                # Nothing for tempest: no tests of ours run there.
                :
                ;;
        esac
    elif [[ "${1:-}" == unstack ]]; then
        # Nothing to stop: the driver runs inside nova-compute, which
        # unstack.sh stops.
        :
    elif [[ "${1:-}" == clean ]]; then
        # clean.sh deletes /etc/nova and devstack's venv afterwards; this
        # also leaves a nova.conf kept elsewhere as it was before stack.
        echo_summary "Removing nova-gpu-p2p"
        cleanup_nova_gpu_p2p
    fi
fi
