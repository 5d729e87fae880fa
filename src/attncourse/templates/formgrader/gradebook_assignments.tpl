{%- extends 'gradebook_base.tpl' -%}
{%- block page_head -%}
<script src="{{ base_url }}/formgrader/static/js/gradebook_assignments.js"></script>
{%- endblock -%}
{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li class="active">人工评分</li>
</ol>
{%- endblock -%}
{%- block table_header -%}
<tr>
  <th>作业</th>
  <th class="text-center">截止时间</th>
  <th class="text-center">提交数</th>
  <th class="text-center">平均分（已确定的分数）</th>
  <th class="text-center">各状态人数</th>
</tr>
{%- endblock -%}
{%- block table_body -%}
<tr><td colspan="5">正在载入……</td></tr>
{%- endblock -%}
