#!/bin/bash
# nova-gpu-p2p devstack plugin: installs the package where Nova runs and
# selects the gpu_p2p compute driver.

function install_nova_gpu_p2p {
    # Not setup_develop: an editable install of nova/virt/gpu_p2p.py could
    # shadow Nova's own package. A plain install adds only that module.
    pip_install "$NOVA_GPU_P2P_DIR"
}

function configure_nova_gpu_p2p {
    iniset "$NOVA_CONF" DEFAULT compute_driver gpu_p2p.GPUP2PLibvirtDriver
    if [[ -n "$GPU_P2P_LEVEL" ]]; then
        iniset "$NOVA_CONF" gpu_p2p p2p_level "$GPU_P2P_LEVEL"
    fi
    if [[ -n "$GPU_P2P_TOPOLOGY_BACKEND" ]]; then
        iniset "$NOVA_CONF" gpu_p2p topology_backend "$GPU_P2P_TOPOLOGY_BACKEND"
    fi
}

if is_service_enabled n-cpu n-api; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing nova-gpu-p2p"
        install_nova_gpu_p2p
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring nova-gpu-p2p"
        configure_nova_gpu_p2p
    fi
fi
