#!/bin/sh
# Stand-in for Prisma's native schema engine on machines that cannot download it
# (see prisma.config.ts). Generate/validate/format never run it; anything that does ends here.
echo "Prisma's native schema engine is not installed on this machine." >&2
echo "Apply migrations with: npm run db:migrate" >&2
exit 1
