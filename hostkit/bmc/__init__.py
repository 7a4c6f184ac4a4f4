"""BIOS settings over a host's BMC (Redfish, through sushy): the connection and its errors
(:mod:`.client`), the facts a BMC gives (:mod:`.facts`), the vendor maps that turn one BIOS intent
into each vendor's attribute (:mod:`.vendors`, data in ``vendors/*.yml``), the plan
(:mod:`.plan`) and its application with a journal for an exact rollback (:mod:`.apply`)."""
