"""kafkalab.protocol: the Kafka wire protocol, pure (bytes in, dicts out).

types      primitive types, classic and compact (flexible) forms, tagged fields
schema     Field / Message: schemas declared as data, one generic codec
messages   the APIs kafkalab speaks and the versions it advertises (APIS), a module per API family
header     framing, request/response headers
api_keys   ApiKeys: every API key by Kafka's name
"""

from kafkalab.protocol.header import (
    RequestHeader,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from kafkalab.protocol.messages import APIS, Api
from kafkalab.protocol.types import ProtocolError, Reader, Writer

__all__ = [
    "APIS",
    "Api",
    "ProtocolError",
    "Reader",
    "RequestHeader",
    "Writer",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
]
