# GNU General Public License v2.0 or later (see https://www.gnu.org/licenses/gpl-2.0.txt)
"""The options every module of pcmkimg.cluster takes."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  executable:
    description:
      - The pcmkimg command to run on the node.
      - A name without a slash is looked up on the node's C(PATH).
    type: str
    default: pcmkimg
  conf:
    description:
      - pcmkimg's configuration file (C(--conf)).
      - When not given, pcmkimg reads C($PCMKIMG_CONF), else C(/etc/pcmkimg/pcmkimg.conf).
      - A file named here must exist and be readable, else pcmkimg exits 2.
    type: path
notes:
  - The module runs pcmkimg on the node with C(--json) and reads its JSON document and exit
    code (see pcmkimg's README, I(Exit codes) and I(JSON output)); it never parses pcmkimg's
    text output.
  - Run it as root on a cluster node (C(become=true)), where pcmkimg is installed (its RPM).
requirements:
  - pcmkimg on the managed node
"""
